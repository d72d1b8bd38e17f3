//! One cgroup per sandbox, for CPU and memory limits, CPU and memory accounting and the
//! freezer. v2 where the host has it (`/sys/fs/cgroup/cgroup.controllers`), v1 otherwise
//! (`/sys/fs/cgroup/<controller>/agentplane/<sandbox>`); where neither can be created the
//! sandbox still runs, without these, and says so.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::host_process::HostProcess;

const ROOT: &str = "/sys/fs/cgroup";
const V1_CONTROLLERS: [&str; 5] = ["cpu", "cpuacct", "memory", "freezer", "pids"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    V2,
    V1,
    None,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V2 => "v2",
            Self::V1 => "v1",
            Self::None => "none",
        }
    }

    pub fn detect() -> Self {
        let root = Path::new(ROOT);
        if root.join("cgroup.controllers").exists() {
            Self::V2
        } else if V1_CONTROLLERS.iter().all(|c| root.join(c).is_dir()) {
            Self::V1
        } else {
            Self::None
        }
    }
}

/// Limits a sandbox's cgroup enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub cpu_quota_us: i64,
    pub cpu_period_us: i64,
    pub memory_bytes: u64,
    pub max_pids: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            cpu_quota_us: 100_000,
            cpu_period_us: 100_000,
            memory_bytes: 1024 * 1024 * 1024,
            max_pids: 512,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Cgroup {
    pub mode: Mode,
    name: String,
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    std::fs::write(path, value)
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

impl Cgroup {
    /// The group of `sandbox` (created or not): `agentplane/<sandbox>`.
    pub fn named(sandbox: &str, mode: Mode) -> Self {
        Self { mode, name: format!("agentplane/{sandbox}") }
    }

    fn dirs(&self) -> Vec<PathBuf> {
        match self.mode {
            Mode::V2 => vec![Path::new(ROOT).join(&self.name)],
            Mode::V1 => V1_CONTROLLERS.iter().map(|c| Path::new(ROOT).join(c).join(&self.name)).collect(),
            Mode::None => vec![],
        }
    }

    fn v1(&self, controller: &str) -> PathBuf {
        Path::new(ROOT).join(controller).join(&self.name)
    }

    fn v2(&self) -> PathBuf {
        Path::new(ROOT).join(&self.name)
    }

    /// Creates the group with its limits. On failure the returned group has mode `None`
    /// (and the reason is logged): the sandbox runs unconfined by cgroups.
    pub fn create(sandbox: &str, limits: Limits) -> Self {
        let mode = Mode::detect();
        let group = Self::named(sandbox, mode);
        match group.try_create(limits) {
            Ok(()) => group,
            Err(err) => {
                tracing::warn!(%sandbox, mode = mode.as_str(), error = %err, "no cgroup for this sandbox: no CPU/memory limits, accounting or pause");
                group.remove();
                Self::named(sandbox, Mode::None)
            }
        }
    }

    fn try_create(&self, limits: Limits) -> std::io::Result<()> {
        match self.mode {
            Mode::None => Ok(()),
            Mode::V1 => {
                for dir in self.dirs() {
                    std::fs::create_dir_all(&dir)?;
                }
                write(&self.v1("cpu").join("cpu.cfs_period_us"), &limits.cpu_period_us.to_string())?;
                write(&self.v1("cpu").join("cpu.cfs_quota_us"), &limits.cpu_quota_us.to_string())?;
                write(&self.v1("memory").join("memory.limit_in_bytes"), &limits.memory_bytes.to_string())?;
                write(&self.v1("pids").join("pids.max"), &limits.max_pids.to_string())?;
                Ok(())
            }
            Mode::V2 => {
                let parent = Path::new(ROOT).join("agentplane");
                std::fs::create_dir_all(&parent)?;
                // Best effort: the controllers must be enabled down the tree.
                let _ = write(&Path::new(ROOT).join("cgroup.subtree_control"), "+cpu +memory +pids");
                let _ = write(&parent.join("cgroup.subtree_control"), "+cpu +memory +pids");
                std::fs::create_dir_all(self.v2())?;
                write(
                    &self.v2().join("cpu.max"),
                    &format!("{} {}", limits.cpu_quota_us, limits.cpu_period_us),
                )?;
                write(&self.v2().join("memory.max"), &limits.memory_bytes.to_string())?;
                write(&self.v2().join("pids.max"), &limits.max_pids.to_string())?;
                Ok(())
            }
        }
    }

    /// A shell fragment that moves the shell (`$$`) into this group; the process it then
    /// `exec`s starts inside. Paths contain only `[a-z0-9_/]`.
    pub fn join_script(&self) -> String {
        self.dirs().iter().map(|d| format!("echo $$ > {}/cgroup.procs && ", d.display())).collect::<String>()
    }

    /// Host pids of every process in the group.
    pub fn pids(&self) -> Vec<u32> {
        let file = match self.mode {
            Mode::V1 => self.v1("freezer").join("cgroup.procs"),
            Mode::V2 => self.v2().join("cgroup.procs"),
            Mode::None => return vec![],
        };
        read(&file).map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect()).unwrap_or_default()
    }

    /// SIGKILLs each of `members` that is in this group, through a pidfd opened before the
    /// membership is checked: a member that left (its pid perhaps reused) is never signalled.
    pub fn kill_members(&self, members: &[u32]) {
        for &pid in members {
            if let Some(held) = HostProcess::open_now(pid)
                && self.pids().contains(&pid)
            {
                held.kill();
            }
        }
    }

    pub fn can_freeze(&self) -> bool {
        self.mode != Mode::None
    }

    pub async fn freeze(&self) -> Result<(), String> {
        self.set_frozen(true).await
    }

    pub async fn thaw(&self) -> Result<(), String> {
        self.set_frozen(false).await
    }

    async fn set_frozen(&self, frozen: bool) -> Result<(), String> {
        let (file, value, done): (PathBuf, &str, &str) = match self.mode {
            Mode::V1 => {
                let f = self.v1("freezer").join("freezer.state");
                (f, if frozen { "FROZEN" } else { "THAWED" }, if frozen { "FROZEN" } else { "THAWED" })
            }
            Mode::V2 => (
                self.v2().join("cgroup.freeze"),
                if frozen { "1" } else { "0" },
                if frozen { "1" } else { "0" },
            ),
            Mode::None => return Err("this node has no cgroup freezer for the sandbox".into()),
        };
        write(&file, value).map_err(|e| format!("writing {}: {e}", file.display()))?;
        // Freezing completes asynchronously; wait until the kernel says so.
        let check = match self.mode {
            Mode::V2 => self.v2().join("cgroup.events"),
            _ => file.clone(),
        };
        for _ in 0..200 {
            let state = read(&check).unwrap_or_default();
            let ok = match self.mode {
                Mode::V2 => state.lines().any(|l| l == format!("frozen {done}")),
                _ => state == done,
            };
            if ok {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Err(format!("the cgroup did not reach {value}"))
    }

    pub fn cpu_seconds(&self) -> Option<f64> {
        match self.mode {
            Mode::V1 => {
                read(&self.v1("cpuacct").join("cpuacct.usage"))?.parse::<u64>().ok().map(|ns| ns as f64 / 1e9)
            }
            Mode::V2 => {
                let stat = read(&self.v2().join("cpu.stat"))?;
                let usec: u64 =
                    stat.lines().find_map(|l| l.strip_prefix("usage_usec ")?.trim().parse().ok())?;
                Some(usec as f64 / 1e6)
            }
            Mode::None => None,
        }
    }

    /// The CPU quota as cores (quota over period); `None` when unlimited or unreadable.
    pub fn cpu_limit_cores(&self) -> Option<f64> {
        let (quota, period) = match self.mode {
            Mode::V1 => (
                read(&self.v1("cpu").join("cpu.cfs_quota_us"))?.parse::<i64>().ok()?,
                read(&self.v1("cpu").join("cpu.cfs_period_us"))?.parse::<i64>().ok()?,
            ),
            Mode::V2 => {
                let max = read(&self.v2().join("cpu.max"))?;
                let (quota, period) = max.split_once(' ')?;
                (quota.parse::<i64>().ok()?, period.parse::<i64>().ok()?)
            }
            Mode::None => return None,
        };
        (quota > 0 && period > 0).then(|| quota as f64 / period as f64)
    }

    pub fn memory_bytes(&self) -> Option<u64> {
        match self.mode {
            Mode::V1 => read(&self.v1("memory").join("memory.usage_in_bytes"))?.parse().ok(),
            Mode::V2 => read(&self.v2().join("memory.current"))?.parse().ok(),
            Mode::None => None,
        }
    }

    pub fn memory_limit_bytes(&self) -> Option<u64> {
        match self.mode {
            Mode::V1 => read(&self.v1("memory").join("memory.limit_in_bytes"))?.parse().ok(),
            Mode::V2 => read(&self.v2().join("memory.max"))?.parse().ok(),
            Mode::None => None,
        }
    }

    /// Removes the group once the kernel has let go of its last process (up to 5 s).
    pub async fn remove_when_empty(&self) -> bool {
        for _ in 0..500 {
            self.remove();
            if self.dirs().iter().all(|d| !d.exists()) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tracing::warn!(group = %self.name, "the sandbox's cgroup could not be removed");
        false
    }

    /// Removes the group (it must be empty); harmless when it does not exist.
    pub fn remove(&self) {
        for dir in self.dirs() {
            let _ = std::fs::remove_dir(&dir);
        }
    }
}
