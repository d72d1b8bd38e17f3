//! What a heartbeat measures on the host: /proc/stat, /proc/meminfo, the free space of the
//! state filesystem, and the CPUs this process may use (affinity and cgroup quota).

use std::path::Path;

use agentplane_domain::telemetry::node::ProcStatCpu;
use agentplane_domain::telemetry::node_host::{CpuQuota, count_cpu_list, effective_cpu_cores, parse_meminfo};

pub struct HostSample {
    pub cpu: Option<ProcStatCpu>,
    pub total_memory_bytes: Option<u64>,
    pub available_memory_bytes: Option<u64>,
    pub available_disk_bytes: Option<u64>,
    pub effective_cpu_cores: Option<f64>,
}

pub async fn sample(state_dir: &Path) -> HostSample {
    let cpu = std::fs::read_to_string("/proc/stat").ok().and_then(|t| ProcStatCpu::parse(&t));
    let (total, available) =
        std::fs::read_to_string("/proc/meminfo").map(|t| parse_meminfo(&t)).unwrap_or((None, None));
    HostSample {
        cpu,
        total_memory_bytes: total,
        available_memory_bytes: available,
        available_disk_bytes: free_disk(state_dir).await,
        effective_cpu_cores: cores(),
    }
}

/// statvfs through stat(1) (`unsafe` is forbidden here): available blocks × block size.
async fn free_disk(dir: &Path) -> Option<u64> {
    let out =
        tokio::process::Command::new("stat").args(["-f", "--format=%a %S"]).arg(dir).output().await.ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let mut parts = text.split_whitespace().map(|p| p.parse::<u64>().ok());
    let (blocks, size) = (parts.next()??, parts.next()??);
    blocks.checked_mul(size)
}

/// The node process's CPUs: its affinity lowered to its cgroup's quota; `None` (the spec's null)
/// when either cannot be established.
fn cores() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let affinity = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).and_then(count_cpu_list);
    effective_cpu_cores(affinity, cgroup_quota())
}

/// The CPU quota of this process's own cgroup (v2 `cpu.max`, v1 `cpu.cfs_quota_us`).
fn cgroup_quota() -> Option<CpuQuota> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
        return CpuQuota::parse_cgroup_v2(
            &std::fs::read_to_string(format!("/sys/fs/cgroup{path}/cpu.max")).ok()?,
        );
    }
    let path = own.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        controllers.split(',').any(|c| c == "cpu").then(|| path.to_owned())
    })?;
    let read = |file: &str| std::fs::read_to_string(format!("/sys/fs/cgroup/cpu{path}/{file}")).ok();
    let quota = read("cpu.cfs_quota_us")?.trim().parse::<i64>().ok()?;
    let period = read("cpu.cfs_period_us")?.trim().parse::<u64>().ok()?;
    CpuQuota::from_cgroup_v1(quota, period)
}
