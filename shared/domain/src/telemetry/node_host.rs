//! What a node daemon reads about its host, as pure parsing: effective CPU cores from affinity
//! and cgroup limits, and memory from `/proc/meminfo`. The daemon reads the files; this decides.

/// A cgroup CPU bandwidth limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuQuota {
    Unlimited,
    Limited { quota_us: u64, period_us: u64 },
}

impl CpuQuota {
    /// cgroup v2 `cpu.max`: `max 100000` or `150000 100000`.
    pub fn parse_cgroup_v2(cpu_max: &str) -> Option<Self> {
        let mut parts = cpu_max.split_whitespace();
        let quota = parts.next()?;
        let period: u64 = parts.next().map_or(Some(100_000), |p| p.parse().ok())?;
        if parts.next().is_some() || period == 0 {
            return None;
        }
        match quota {
            "max" => Some(Self::Unlimited),
            q => q
                .parse()
                .ok()
                .filter(|q| *q > 0)
                .map(|quota_us| Self::Limited { quota_us, period_us: period }),
        }
    }

    /// cgroup v1 `cpu.cfs_quota_us` (-1 for no limit) and `cpu.cfs_period_us`.
    pub fn from_cgroup_v1(quota_us: i64, period_us: u64) -> Option<Self> {
        if period_us == 0 {
            return None;
        }
        match u64::try_from(quota_us) {
            Ok(0) => None,
            Ok(quota_us) => Some(Self::Limited { quota_us, period_us }),
            Err(_) if quota_us == -1 => Some(Self::Unlimited),
            Err(_) => None,
        }
    }
}

/// The CPU the node process can use: its affinity CPU count, lowered to the cgroup quota.
/// `None` when either cannot be established (the spec's null).
pub fn effective_cpu_cores(affinity_cpus: Option<u32>, quota: Option<CpuQuota>) -> Option<f64> {
    let cpus = f64::from(affinity_cpus.filter(|n| *n > 0)?);
    match quota? {
        CpuQuota::Unlimited => Some(cpus),
        CpuQuota::Limited { quota_us, period_us } => Some(cpus.min(quota_us as f64 / period_us as f64)),
    }
}

/// Number of CPUs in a cpulist like `0-3,6` (the `Cpus_allowed_list` of /proc/self/status).
pub fn count_cpu_list(list: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                n = n.checked_add(b.checked_sub(a)?.checked_add(1)?)?;
            }
            None => {
                part.parse::<u32>().ok()?;
                n = n.checked_add(1)?;
            }
        }
    }
    (n > 0).then_some(n)
}

/// `MemTotal` and `MemAvailable` of `/proc/meminfo`, in bytes; each `None` when absent or
/// unreadable.
pub fn parse_meminfo(meminfo: &str) -> (Option<u64>, Option<u64>) {
    let field = |name: &str| {
        meminfo.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let mut parts = rest.split_whitespace();
            let value: u64 = parts.next()?.parse().ok()?;
            match parts.next() {
                Some("kB") => value.checked_mul(1024),
                None => Some(value),
                Some(_) => None,
            }
        })
    };
    (field("MemTotal"), field("MemAvailable"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_effective_cores_are_the_affinity_lowered_to_the_cgroup_quota() {
        assert_eq!(effective_cpu_cores(Some(4), Some(CpuQuota::Unlimited)), Some(4.0));
        assert_eq!(
            CpuQuota::parse_cgroup_v2("150000 100000\n"),
            Some(CpuQuota::Limited { quota_us: 150_000, period_us: 100_000 })
        );
        assert_eq!(effective_cpu_cores(Some(4), CpuQuota::parse_cgroup_v2("150000 100000")), Some(1.5));
        assert_eq!(effective_cpu_cores(Some(1), CpuQuota::parse_cgroup_v2("400000 100000")), Some(1.0));
        assert_eq!(effective_cpu_cores(Some(2), CpuQuota::parse_cgroup_v2("max 100000")), Some(2.0));
        assert_eq!(effective_cpu_cores(Some(2), CpuQuota::from_cgroup_v1(-1, 100_000)), Some(2.0));
        assert_eq!(effective_cpu_cores(Some(2), CpuQuota::from_cgroup_v1(50_000, 100_000)), Some(0.5));
    }

    #[test]
    fn node_effective_cores_are_null_when_they_cannot_be_established() {
        assert_eq!(effective_cpu_cores(None, Some(CpuQuota::Unlimited)), None);
        assert_eq!(effective_cpu_cores(Some(0), Some(CpuQuota::Unlimited)), None);
        assert_eq!(effective_cpu_cores(Some(2), None), None);
        assert_eq!(CpuQuota::parse_cgroup_v2("lots 100000"), None);
        assert_eq!(CpuQuota::parse_cgroup_v2("100 0"), None);
        assert_eq!(CpuQuota::from_cgroup_v1(-5, 100_000), None);
        assert_eq!(CpuQuota::from_cgroup_v1(100, 0), None);
    }

    #[test]
    fn cpu_lists_count_their_cpus() {
        assert_eq!(count_cpu_list("0-3,6\n"), Some(5));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("x"), None);
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list(""), None);
    }

    #[test]
    fn node_memory_comes_from_memtotal_and_memavailable() {
        let text = "MemTotal:       16384 kB\nMemFree:         100 kB\nMemAvailable:    8192 kB\n";
        assert_eq!(parse_meminfo(text), (Some(16_777_216), Some(8_388_608)));
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n"), (Some(1024), None));
        assert_eq!(parse_meminfo("MemTotalX: 1 kB\nMemAvailable: x kB"), (None, None));
    }
}
