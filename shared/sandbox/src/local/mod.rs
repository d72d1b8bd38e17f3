//! The local provider: each sandbox is a directory (its `/workspace`) and the processes started
//! in it, isolated by bubblewrap (own mount, PID, network, IPC and UTS namespaces; only the
//! workspace writable) and placed in the sandbox's cgroup.
//!
//! A sandbox has one long-lived init (`bwrap … sleep infinity`) that owns its namespaces; every
//! process enters them with `nsenter`, so all processes of a sandbox share one PID namespace
//! and one cgroup. Nothing is tied to the daemon's lifetime: after a daemon restart the sandbox
//! and its processes are still there to be found.

pub mod cgroup;
pub mod procfs;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use agentplane_domain::sandbox::{ProcessConfig, SandboxId};
use tokio::process::{Child, Command};

use self::cgroup::{Cgroup, Limits};

const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(Debug, Clone)]
pub struct LocalProvider {
    state_dir: PathBuf,
    limits: Limits,
}

/// A sandbox on this host.
#[derive(Debug)]
pub struct LocalSandbox {
    pub id: SandboxId,
    dir: PathBuf,
    pub cgroup: Cgroup,
    /// Host pids of the outer bwrap and of the namespace's init.
    outer: u32,
    init: u32,
    pub env_vars: BTreeMap<String, String>,
}

/// A process just started, stopped at its first instruction until `release`d, so its pid is
/// known even when it would exit at once.
pub struct Started {
    pub child: Child,
    pub pid: u32,
}

impl LocalProvider {
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        Self { state_dir: state_dir.into(), limits: Limits::default() }
    }

    fn sandbox_dir(&self, id: &SandboxId) -> PathBuf {
        self.state_dir.join("sandboxes").join(id.as_str())
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    pub async fn create(
        &self,
        id: &SandboxId,
        env_vars: BTreeMap<String, String>,
    ) -> Result<LocalSandbox, String> {
        let dir = self.sandbox_dir(id);
        let workspace = dir.join("workspace");
        std::fs::create_dir_all(&workspace).map_err(|e| format!("creating the workspace: {e}"))?;
        let cgroup = Cgroup::create(id.as_str(), self.limits);
        let mut args: Vec<String> = vec![
            "--ro-bind".into(),
            "/usr".into(),
            "/usr".into(),
            "--ro-bind".into(),
            "/etc".into(),
            "/etc".into(),
        ];
        for top in ["bin", "lib", "lib64", "sbin"] {
            let host = Path::new("/").join(top);
            if let Ok(target) = std::fs::read_link(&host) {
                args.extend(["--symlink".into(), target.display().to_string(), format!("/{top}")]);
            } else if host.is_dir() {
                args.extend(["--ro-bind".into(), format!("/{top}"), format!("/{top}")]);
            }
        }
        args.extend([
            "--bind".into(),
            workspace.display().to_string(),
            "/workspace".into(),
            "--dev".into(),
            "/dev".into(),
            "--proc".into(),
            "/proc".into(),
            "--unshare-all".into(),
            "--remount-ro".into(),
            "/".into(),
            "--chdir".into(),
            "/workspace".into(),
            "--".into(),
            "sleep".into(),
            "infinity".into(),
        ]);
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("{}exec \"$@\"", cgroup.join_script()))
            .arg("sh")
            .arg("bwrap")
            .args(&args)
            .env_clear()
            .env("PATH", PATH)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting bubblewrap: {e}"))?;
        let outer = child.id().ok_or("bubblewrap exited at once")?;
        let mut init = None;
        for _ in 0..400 {
            if let Some(pid) = procfs::children(outer).first()
                && procfs::ns_pids(*pid).len() >= 2
            {
                init = Some(*pid);
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut stderr) = child.stderr.take() {
                    use tokio::io::AsyncReadExt;
                    let _ = stderr.read_to_string(&mut err).await;
                }
                cgroup.remove();
                return Err(format!("bubblewrap failed ({status}): {}", err.trim()));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let Some(init) = init else {
            let _ = child.start_kill();
            cgroup.remove();
            return Err("the sandbox's namespaces did not come up".into());
        };
        // Reaped in the background by tokio once it exits; the sandbox outlives this handle.
        drop(child);
        std::fs::write(dir.join("init.pid"), format!("{outer} {init}"))
            .map_err(|e| format!("writing init.pid: {e}"))?;
        Ok(LocalSandbox { id: id.clone(), dir, cgroup, outer, init, env_vars })
    }

    /// Finds a sandbox a previous daemon created, if its init still runs.
    pub fn adopt(&self, id: &SandboxId, env_vars: BTreeMap<String, String>) -> Option<LocalSandbox> {
        let dir = self.sandbox_dir(id);
        let text = std::fs::read_to_string(dir.join("init.pid")).ok()?;
        let mut pids = text.split_whitespace().filter_map(|p| p.parse::<u32>().ok());
        let (outer, init) = (pids.next()?, pids.next()?);
        if !procfs::alive(init) {
            return None;
        }
        let mode = cgroup::Mode::detect();
        let group = Cgroup::named(id.as_str(), mode);
        let cgroup =
            if group.pids().contains(&init) { group } else { Cgroup::named(id.as_str(), cgroup::Mode::None) };
        Some(LocalSandbox { id: id.clone(), dir, cgroup, outer, init, env_vars })
    }

    pub async fn start(&self, sandbox: &LocalSandbox, config: &ProcessConfig) -> Result<Started, String> {
        let cwd = config.cwd.clone().unwrap_or_else(|| "/workspace".into());
        let mut env: Vec<String> =
            vec![format!("PATH={PATH}"), "HOME=/workspace".into(), "TMPDIR=/workspace".into()];
        env.extend(sandbox.env_vars.iter().chain(config.envs.iter()).map(|(k, v)| format!("{k}={v}")));
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("{}exec \"$@\"", sandbox.cgroup.join_script()))
            .arg("sh")
            .args([
                "nsenter",
                "-t",
                &sandbox.init.to_string(),
                "-m",
                "-p",
                "-n",
                "-i",
                "-u",
                "-r",
                "-w",
                "--",
            ])
            .args(["env", "-i", "-C", &cwd])
            .args(&env)
            // Stop before the command runs, so that its pid can be read even if it exits at once.
            .args(["sh", "-c", "kill -STOP $$; exec \"$@\"", "sh", &config.cmd])
            .args(&config.args)
            .env_clear()
            .env("PATH", PATH)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(false)
            .spawn()
            .map_err(|e| format!("starting the process: {e}"))?;
        let helper = child.id().ok_or("the process exited at once")?;
        for _ in 0..1000 {
            // nsenter stops itself when its child stops, and continues the child when it is
            // continued: so wait for both to stop, then continue nsenter.
            if let Some(&inner) = procfs::children(helper).first()
                && procfs::state(inner) == Some('T')
                && procfs::state(helper) == Some('T')
            {
                let pid = procfs::ns_pids(inner).last().copied().unwrap_or(0);
                if procfs::signal(helper, "CONT").await {
                    return Ok(Started { child, pid });
                }
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("the process could not enter the sandbox ({status})"));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let _ = child.start_kill();
        Err("the process did not start in time".into())
    }

    /// Processes running in the sandbox other than its init: (pid in the sandbox, argv).
    pub fn live_processes(&self, sandbox: &LocalSandbox) -> Vec<(u32, Vec<String>)> {
        let sleeper: Vec<u32> = procfs::children(sandbox.init);
        let mut out = Vec::new();
        for host in sandbox.cgroup.pids() {
            if host == sandbox.outer || host == sandbox.init || sleeper.contains(&host) {
                continue;
            }
            let ns = procfs::ns_pids(host);
            // One level: a host-side helper (nsenter), not a sandbox process.
            if ns.len() < 2 {
                continue;
            }
            if let Some(&pid) = ns.last() {
                out.push((pid, procfs::cmdline(host)));
            }
        }
        out
    }

    /// Kills every process (the PID namespace dies with its init), removes the cgroup and the
    /// workspace.
    pub async fn destroy(&self, sandbox: &LocalSandbox) {
        if sandbox.cgroup.can_freeze() {
            let _ = sandbox.cgroup.thaw().await;
        }
        procfs::signal(sandbox.init, "KILL").await;
        procfs::signal(sandbox.outer, "KILL").await;
        for _ in 0..400 {
            if sandbox.cgroup.pids().is_empty() && !procfs::alive(sandbox.init) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        sandbox.cgroup.remove_when_empty().await;
        let _ = std::fs::remove_dir_all(&sandbox.dir);
    }

    pub fn isolation(&self, sandbox: &LocalSandbox) -> BTreeMap<String, String> {
        let mut out = BTreeMap::from([
            ("provider".to_owned(), "local".to_owned()),
            ("namespaces".to_owned(), "mount,pid,net,ipc,uts".to_owned()),
            ("writable".to_owned(), "/workspace".to_owned()),
            ("cgroup".to_owned(), sandbox.cgroup.mode.as_str().to_owned()),
        ]);
        if sandbox.cgroup.mode == cgroup::Mode::None {
            out.insert(
                "limits".into(),
                "none: no cgroup, so no CPU/memory limits, accounting or pause".into(),
            );
        } else {
            out.insert(
                "cpu_limit_cores".into(),
                format!("{}", self.limits.cpu_quota_us as f64 / self.limits.cpu_period_us as f64),
            );
            out.insert("memory_limit_bytes".into(), self.limits.memory_bytes.to_string());
        }
        out
    }
}
