//! What a node's heartbeat carries and what Core keeps of it. The /proc parsing and the CPU
//! arithmetic are the telemetry module's (`telemetry::node`, `telemetry::node_host`), so the
//! daemon measures exactly what the node routes report.

use serde::{Deserialize, Serialize};

use super::SandboxId;
use crate::Timestamp;
use crate::telemetry::node::{CpuCounters, ProcStatCpu, host_cpu_utilization};

/// Usage counters of one sandbox, as its node measures them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxUsage {
    pub sandbox_id: SandboxId,
    pub cpu_seconds: Option<f64>,
    pub memory_bytes: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    /// The sandbox's CPU quota in cores; `None` when unlimited or unknown.
    #[serde(default)]
    pub cpu_limit_cores: Option<f64>,
}

/// What a node sends every few seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub connection_id: String,
    pub observed_at: Timestamp,
    pub cpu: Option<ProcStatCpu>,
    pub total_memory_bytes: Option<u64>,
    pub available_memory_bytes: Option<u64>,
    pub available_disk_bytes: Option<u64>,
    pub effective_cpu_cores: Option<f64>,
    #[serde(default)]
    pub sandboxes: Vec<SandboxUsage>,
}

/// What Core keeps of a heartbeat: the values plus the utilisation derived against the previous
/// heartbeat of the same connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostObservation {
    pub connection_id: String,
    pub observed_at: Timestamp,
    pub cpu: Option<ProcStatCpu>,
    pub cpu_utilization: Option<f64>,
    pub total_memory_bytes: Option<u64>,
    pub available_memory_bytes: Option<u64>,
    pub available_disk_bytes: Option<u64>,
    pub effective_cpu_cores: Option<f64>,
    pub sandboxes: Vec<SandboxUsage>,
}

impl HostObservation {
    /// The first heartbeat of a connection has no baseline: its utilisation is `None`.
    pub fn from_heartbeat(heartbeat: Heartbeat, previous: Option<&HostObservation>) -> Self {
        let baseline = previous.map(|p| CpuCounters { connection_id: p.connection_id.clone(), stat: p.cpu });
        let current = CpuCounters { connection_id: heartbeat.connection_id.clone(), stat: heartbeat.cpu };
        let cpu_utilization = host_cpu_utilization(baseline.as_ref(), &current);
        Self {
            connection_id: heartbeat.connection_id,
            observed_at: heartbeat.observed_at,
            cpu: heartbeat.cpu,
            cpu_utilization,
            total_memory_bytes: heartbeat.total_memory_bytes,
            available_memory_bytes: heartbeat.available_memory_bytes,
            available_disk_bytes: heartbeat.available_disk_bytes,
            effective_cpu_cores: heartbeat.effective_cpu_cores,
            sandboxes: heartbeat.sandboxes,
        }
    }
}

impl HostObservation {
    /// The values the telemetry read model (`telemetry::node`) reports for this heartbeat.
    pub fn telemetry(&self) -> crate::telemetry::node::NodeObservation {
        crate::telemetry::node::NodeObservation {
            observed_at: self.observed_at,
            effective_cpu_cores: self.effective_cpu_cores,
            cpu_utilization: self.cpu_utilization,
            total_memory_bytes: self.total_memory_bytes,
            available_memory_bytes: self.available_memory_bytes,
            available_disk_bytes: self.available_disk_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_heartbeat_of_a_new_connection_has_no_utilization() {
        let hb = |conn: &str, user: u64| Heartbeat {
            connection_id: conn.into(),
            observed_at: Timestamp::from_unix_seconds(1),
            cpu: Some(ProcStatCpu { user, idle: user, ..ProcStatCpu::default() }),
            total_memory_bytes: None,
            available_memory_bytes: None,
            available_disk_bytes: None,
            effective_cpu_cores: None,
            sandboxes: vec![],
        };
        let first = HostObservation::from_heartbeat(hb("a", 10), None);
        assert_eq!(first.cpu_utilization, None);
        let second = HostObservation::from_heartbeat(hb("a", 20), Some(&first));
        assert_eq!(second.cpu_utilization, Some(0.5));
        let restarted = HostObservation::from_heartbeat(hb("b", 30), Some(&second));
        assert_eq!(restarted.cpu_utilization, None);
    }

    #[test]
    fn heartbeats_from_daemons_that_send_no_guest_ticks_still_parse() {
        let body = serde_json::json!({
            "connection_id": "c", "observed_at": 1000,
            "cpu": {"user": 1, "nice": 0, "system": 2, "idle": 3, "iowait": 0, "irq": 0, "softirq": 0, "steal": 0},
            "total_memory_bytes": null, "available_memory_bytes": null, "available_disk_bytes": null,
            "effective_cpu_cores": null,
        });
        let heartbeat: Heartbeat = serde_json::from_value(body).expect("an older heartbeat parses");
        assert_eq!(heartbeat.cpu.map(|c| (c.user, c.guest)), Some((1, 0)));
    }
}
