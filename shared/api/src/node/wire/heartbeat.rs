//! A node's heartbeat: its host's sample and the usage of each sandbox it hosts.

use super::*;

/// The aggregate `cpu` line of the host's `/proc/stat`, in ticks; a missing column reads 0.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default)]
pub struct ProcStatCpuWire {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

impl From<ProcStatCpuWire> for ProcStatCpu {
    fn from(c: ProcStatCpuWire) -> Self {
        Self {
            user: c.user,
            nice: c.nice,
            system: c.system,
            idle: c.idle,
            iowait: c.iowait,
            irq: c.irq,
            softirq: c.softirq,
            steal: c.steal,
            guest: c.guest,
            guest_nice: c.guest_nice,
        }
    }
}

/// Usage counters of one sandbox, as its node measures them.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SandboxUsageWire {
    #[schema(value_type = String)]
    pub sandbox_id: SandboxId,
    pub cpu_seconds: Option<f64>,
    pub memory_bytes: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    /// The sandbox's CPU quota in cores; absent or `null` when unlimited or unknown.
    #[serde(default)]
    pub cpu_limit_cores: Option<f64>,
}

/// What a node sends every few seconds: its host, and its sandboxes' counters.
#[derive(Debug, Deserialize, ToSchema)]
pub struct HeartbeatRequest {
    /// The daemon connection, 1 to 64 characters.
    #[schema(min_length = 1, max_length = 64)]
    pub connection_id: String,
    /// Unix milliseconds.
    #[schema(value_type = i64)]
    pub observed_at: Timestamp,
    pub cpu: Option<ProcStatCpuWire>,
    pub total_memory_bytes: Option<u64>,
    pub available_memory_bytes: Option<u64>,
    pub available_disk_bytes: Option<u64>,
    pub effective_cpu_cores: Option<f64>,
    #[serde(default)]
    pub sandboxes: Vec<SandboxUsageWire>,
}

impl From<HeartbeatRequest> for Heartbeat {
    fn from(h: HeartbeatRequest) -> Self {
        Self {
            connection_id: h.connection_id,
            observed_at: h.observed_at,
            cpu: h.cpu.map(Into::into),
            total_memory_bytes: h.total_memory_bytes,
            available_memory_bytes: h.available_memory_bytes,
            available_disk_bytes: h.available_disk_bytes,
            effective_cpu_cores: h.effective_cpu_cores,
            sandboxes: h
                .sandboxes
                .into_iter()
                .map(|u| SandboxUsage {
                    sandbox_id: u.sandbox_id,
                    cpu_seconds: u.cpu_seconds,
                    memory_bytes: u.memory_bytes,
                    memory_limit_bytes: u.memory_limit_bytes,
                    cpu_limit_cores: u.cpu_limit_cores,
                })
                .collect(),
        }
    }
}

// ---- POST /node/v1/reports ----
