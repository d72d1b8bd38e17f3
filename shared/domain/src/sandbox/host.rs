//! Host telemetry arithmetic for node heartbeats: the parsing of /proc text and the derived
//! values, pure so that the edge cases (first heartbeat, counter resets) are cheap to test.

use serde::{Deserialize, Serialize};

use super::SandboxId;
use crate::Timestamp;

/// The aggregate `cpu` line of /proc/stat, in ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// From the text of /proc/stat. Guest time is already inside user/nice, so it is not read.
    pub fn parse(proc_stat: &str) -> Option<Self> {
        let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line.split_whitespace().skip(1).map(str::parse).collect::<Result<_, _>>().ok()?;
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        (v.len() >= 4).then(|| Self {
            user: at(0),
            nice: at(1),
            system: at(2),
            idle: at(3),
            iowait: at(4),
            irq: at(5),
            softirq: at(6),
            steal: at(7),
        })
    }

    fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq + self.steal
    }

    fn total(&self) -> u64 {
        self.busy() + self.idle + self.iowait
    }

    fn fields(&self) -> [u64; 8] {
        [self.user, self.nice, self.system, self.idle, self.iowait, self.irq, self.softirq, self.steal]
    }
}

/// Busy share between two samples, 0 to 1; `None` without a baseline, on a counter reset, or
/// when no tick passed.
pub fn cpu_utilization(previous: Option<&CpuTimes>, current: &CpuTimes) -> Option<f64> {
    let previous = previous?;
    if previous.fields().iter().zip(current.fields()).any(|(p, c)| c < *p) {
        return None;
    }
    let total = current.total() - previous.total();
    if total == 0 {
        return None;
    }
    #[allow(clippy::cast_precision_loss)]
    let share = (current.busy() - previous.busy()) as f64 / total as f64;
    Some(share.clamp(0.0, 1.0))
}

/// `MemTotal` and `MemAvailable` of /proc/meminfo, in bytes.
pub fn parse_meminfo(text: &str) -> (Option<u64>, Option<u64>) {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            kib.checked_mul(1024)
        })
    };
    (field("MemTotal"), field("MemAvailable"))
}

/// The CPUs a process may use: its affinity, capped by a cgroup quota when there is one.
/// `None` when the affinity is unknown.
pub fn effective_cpu_cores(
    affinity: Option<u32>,
    quota_us: Option<i64>,
    period_us: Option<i64>,
) -> Option<f64> {
    let cores = f64::from(affinity.filter(|n| *n > 0)?);
    match (quota_us, period_us) {
        #[allow(clippy::cast_precision_loss)]
        (Some(q), Some(p)) if q > 0 && p > 0 => Some(cores.min(q as f64 / p as f64)),
        _ => Some(cores),
    }
}

/// Number of CPUs in a cpulist like `0-3,6` (the `Cpus_allowed_list` of /proc/self/status).
pub fn count_cpu_list(list: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                n += b.checked_sub(a)? + 1;
            }
            None => {
                part.parse::<u32>().ok()?;
                n += 1;
            }
        }
    }
    (n > 0).then_some(n)
}

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
    pub cpu: Option<CpuTimes>,
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
    pub cpu: Option<CpuTimes>,
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
        let baseline =
            previous.filter(|p| p.connection_id == heartbeat.connection_id).and_then(|p| p.cpu.as_ref());
        let cpu_utilization = heartbeat.cpu.as_ref().and_then(|c| cpu_utilization(baseline, c));
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

    const STAT: &str = "cpu  100 0 50 800 50 0 0 0 10 0\ncpu0 50 0 25 400 25 0 0 0 0 0\n";

    #[test]
    fn utilization_is_busy_over_total_ticks_and_ignores_guest() {
        let a = CpuTimes::parse(STAT).expect("parses");
        let b = CpuTimes { user: 200, idle: 850, ..a };
        // 100 busy ticks of 150.
        let u = cpu_utilization(Some(&a), &b).expect("has a baseline");
        assert!((u - 100.0 / 150.0).abs() < 1e-9);
    }

    #[test]
    fn no_baseline_or_a_reset_gives_none() {
        let a = CpuTimes::parse(STAT).expect("parses");
        assert_eq!(cpu_utilization(None, &a), None);
        let reset = CpuTimes { user: 1, ..a };
        assert_eq!(cpu_utilization(Some(&a), &reset), None);
        assert_eq!(cpu_utilization(Some(&a), &a), None);
    }

    #[test]
    fn the_first_heartbeat_of_a_new_connection_has_no_utilization() {
        let hb = |conn: &str, user: u64| Heartbeat {
            connection_id: conn.into(),
            observed_at: Timestamp::from_unix_seconds(1),
            cpu: Some(CpuTimes { user, idle: user, ..CpuTimes::default() }),
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
    fn meminfo_and_cpu_lists_parse() {
        let (total, avail) =
            parse_meminfo("MemTotal:       1000 kB\nMemFree: 5 kB\nMemAvailable:    500 kB\n");
        assert_eq!((total, avail), (Some(1_024_000), Some(512_000)));
        assert_eq!(count_cpu_list("0-3,6\n"), Some(5));
        assert_eq!(count_cpu_list("x"), None);
        assert_eq!(effective_cpu_cores(Some(4), Some(150_000), Some(100_000)), Some(1.5));
        assert_eq!(effective_cpu_cores(Some(2), Some(-1), Some(100_000)), Some(2.0));
        assert_eq!(effective_cpu_cores(None, None, None), None);
    }
}
