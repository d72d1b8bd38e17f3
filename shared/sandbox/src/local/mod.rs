//! The local provider: each sandbox is a jailed set of processes on this host — its own user,
//! PID, network, IPC, UTS, cgroup and mount namespaces, an unprivileged host uid, a minimal
//! root with only `/workspace` and `/tmp` writable, seccomp — placed in the sandbox's cgroup.
//! [`jail`] says exactly what a process sees and may do.
//!
//! A sandbox has one long-lived init (`bwrap … sleep infinity`) that owns its namespaces; every
//! process joins them, so all processes of a sandbox share one PID namespace and one cgroup.
//! Nothing is tied to the daemon's lifetime: after a daemon restart the sandbox and its
//! processes are still there to be found.

pub mod cgroup;
pub mod jail;
pub mod procfs;
pub mod seccomp;
pub mod workspace;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use agentplane_domain::sandbox::{ProcessConfig, SandboxId};
use tokio::io::AsyncReadExt;
use tokio::process::Child;

use self::cgroup::{Cgroup, Limits};
use self::jail::{NodeFiles, ProcessSpec, SandboxDirs};

/// How long a process may take to reach its first instruction inside the sandbox, and the
/// sandbox's init to bring up its namespaces (generous: a loaded host is slow, not broken).
const START_WITHIN: Duration = Duration::from_secs(15);

#[derive(Debug, Clone)]
pub struct LocalProvider {
    state_dir: PathBuf,
    limits: Limits,
    files: Arc<OnceLock<Result<NodeFiles, String>>>,
}

/// Why this host cannot run sandboxes, when it cannot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostProblem {
    #[error(
        "`{0}` is not installed (the sandbox needs bubblewrap, bash and util-linux's nsenter and setpriv)"
    )]
    Missing(&'static str),
    #[error("user namespaces are disabled on this host (/proc/sys/user/max_user_namespaces is 0)")]
    NoUserNamespaces,
    #[error(
        "{0} is not searchable by other users, so a sandbox's unprivileged uid cannot reach its workspace under it: choose another state directory"
    )]
    StateDirClosed(String),
}

/// A sandbox on this host.
#[derive(Debug)]
pub struct LocalSandbox {
    pub id: SandboxId,
    dirs: SandboxDirs,
    pub cgroup: Cgroup,
    /// Host pids of the outer bwrap and of the namespace's init.
    outer: u32,
    init: u32,
    pub env_vars: BTreeMap<String, String>,
    /// Set once the node has begun killing the sandbox: the exits that follow are its SIGKILL.
    ended_by_node: Arc<AtomicBool>,
}

impl LocalSandbox {
    fn new(
        id: &SandboxId,
        dirs: SandboxDirs,
        cgroup: Cgroup,
        (outer, init): (u32, u32),
        env_vars: BTreeMap<String, String>,
    ) -> Self {
        Self { id: id.clone(), dirs, cgroup, outer, init, env_vars, ended_by_node: Arc::default() }
    }

    /// The host directory mounted at the sandbox's `/workspace`, and the uid owning it.
    pub fn workspace(&self) -> (PathBuf, u32) {
        (self.dirs.workspace(), self.dirs.uid)
    }
}

/// A process just started, stopped at its first instruction until `release`d, so its pid is
/// known even when it would exit at once.
pub struct Started {
    pub child: Child,
    /// The process's pid inside the sandbox.
    pub pid: u32,
    ended_by_node: Arc<AtomicBool>,
}

impl Started {
    /// The witnessed exit as (exit code, signal). bubblewrap reports a signal death as the
    /// shell's 128+n; the signal itself is known only when the node sent it (kill, deadline).
    pub fn exit_of(&self, status: std::process::ExitStatus) -> (Option<i32>, Option<i32>) {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return (None, Some(signal));
        }
        let code = status.code();
        let node_kill = self.ended_by_node.load(Ordering::SeqCst) && code == Some(128 + 9);
        (code, node_kill.then_some(9))
    }
}

impl LocalProvider {
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        Self { state_dir: state_dir.into(), limits: Limits::default(), files: Arc::new(OnceLock::new()) }
    }

    fn sandbox_dirs(&self, id: &SandboxId) -> SandboxDirs {
        SandboxDirs::new(self.state_dir.join("sandboxes").join(id.as_str()), id)
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// Writes the node's shared files (the synthesized `/etc`, the seccomp programs) once, and
    /// makes the state directory searchable.
    pub fn prepare(&self) -> Result<(), String> {
        self.files().map(|_| ())
    }

    /// What keeps this host from running sandboxes, if anything.
    pub fn host_problem(&self) -> Option<HostProblem> {
        host_problem(&self.state_dir)
    }

    fn files(&self) -> Result<&NodeFiles, String> {
        self.files
            .get_or_init(|| {
                NodeFiles::prepare(&self.state_dir)
                    .map_err(|e| format!("preparing the node's sandbox files: {e}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    pub async fn create(
        &self,
        id: &SandboxId,
        env_vars: BTreeMap<String, String>,
    ) -> Result<LocalSandbox, String> {
        let files = self.files()?;
        if let Some(problem) = self.host_problem() {
            return Err(problem.to_string());
        }
        let dirs = self.sandbox_dirs(id);
        dirs.prepare().map_err(|e| format!("preparing the sandbox's directories: {e}"))?;
        let cgroup = Cgroup::create(id.as_str(), self.limits);
        let (mut command, _) = jail::init_command(files, &dirs, &cgroup.join_script())
            .map_err(|e| format!("writing the sandbox's arguments: {e}"))?;
        let mut child = command.spawn().map_err(|e| format!("starting bubblewrap: {e}"))?;
        let outer = child.id().ok_or("bubblewrap exited at once")?;
        let deadline = Instant::now() + START_WITHIN;
        let init = loop {
            if let Some(pid) = procfs::children(outer).first()
                && procfs::ns_pids(*pid).len() >= 2
                && !procfs::children(*pid).is_empty()
            {
                break Some(*pid);
            }
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut stderr) = child.stderr.take() {
                    let _ = stderr.read_to_string(&mut err).await;
                }
                cgroup.remove();
                return Err(format!("bubblewrap failed ({status}): {}", err.trim()));
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let Some(init) = init else {
            let _ = child.start_kill();
            cgroup.remove();
            return Err("the sandbox's namespaces did not come up".into());
        };
        // Reaped in the background by tokio once it exits; the sandbox outlives this handle.
        drop(child);
        std::fs::write(dirs.root.join("init.pid"), format!("{outer} {init}"))
            .map_err(|e| format!("writing init.pid: {e}"))?;
        Ok(LocalSandbox::new(id, dirs, cgroup, (outer, init), env_vars))
    }

    /// Finds a sandbox a previous daemon created, if its init still runs.
    pub fn adopt(&self, id: &SandboxId, env_vars: BTreeMap<String, String>) -> Option<LocalSandbox> {
        let dirs = self.sandbox_dirs(id);
        let text = std::fs::read_to_string(dirs.root.join("init.pid")).ok()?;
        let mut pids = text.split_whitespace().filter_map(|p| p.parse::<u32>().ok());
        let (outer, init) = (pids.next()?, pids.next()?);
        if !procfs::alive(init) {
            return None;
        }
        let mode = cgroup::Mode::detect();
        let group = Cgroup::named(id.as_str(), mode);
        let cgroup =
            if group.pids().contains(&init) { group } else { Cgroup::named(id.as_str(), cgroup::Mode::None) };
        Some(LocalSandbox::new(id, dirs, cgroup, (outer, init), env_vars))
    }

    pub async fn start(&self, sandbox: &LocalSandbox, config: &ProcessConfig) -> Result<Started, String> {
        let files = self.files()?;
        let mut env = sandbox.env_vars.clone();
        env.extend(config.envs.iter().map(|(k, v)| (k.clone(), v.clone())));
        let spec = ProcessSpec {
            cwd: config.cwd.as_deref().unwrap_or("/workspace"),
            cmd: &config.cmd,
            args: &config.args,
            env: &env,
        };
        let (mut command, args_file) =
            jail::process_command(files, &sandbox.dirs, &sandbox.cgroup.join_script(), sandbox.init, &spec)
                .map_err(|e| format!("writing the process's arguments: {e}"))?;
        let spawned = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(false)
            .spawn();
        let result = match spawned {
            Ok(child) => self.release(child, sandbox).await,
            Err(e) => Err(format!("starting the process: {e}")),
        };
        let _ = std::fs::remove_file(&args_file);
        result
    }

    /// Waits until the process has stopped itself at its first instruction inside the sandbox,
    /// reads its pid there, and lets it run.
    async fn release(&self, mut child: Child, sandbox: &LocalSandbox) -> Result<Started, String> {
        let helper = child.id().ok_or("the process exited at once")?;
        let deadline = Instant::now() + START_WITHIN;
        loop {
            if let Some(inner) = stopped_in_sandbox(helper) {
                let pid = procfs::ns_pids(inner).last().copied().unwrap_or(0);
                if procfs::signal(inner, "CONT").await {
                    return Ok(Started { child, pid, ended_by_node: sandbox.ended_by_node.clone() });
                }
            }
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut stderr) = child.stderr.take() {
                    let _ = stderr.read_to_string(&mut err).await;
                }
                return Err(format!("the process could not enter the sandbox ({status}): {}", err.trim()));
            }
            if Instant::now() > deadline {
                let _ = child.start_kill();
                return Err("the process did not start in time".into());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
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
            // One level: a host-side helper (the shell, bwrap's monitor), not a sandbox process;
            // bwrap's own steps into the namespace are not processes of the sandbox either.
            if ns.len() < 2 || is_bwrap(host) {
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
        sandbox.ended_by_node.store(true, Ordering::SeqCst);
        if sandbox.cgroup.can_freeze() {
            let _ = sandbox.cgroup.thaw().await;
        }
        procfs::signal(sandbox.init, "KILL").await;
        procfs::signal(sandbox.outer, "KILL").await;
        let deadline = Instant::now() + START_WITHIN;
        while Instant::now() < deadline {
            if sandbox.cgroup.pids().is_empty() && !procfs::alive(sandbox.init) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        sandbox.cgroup.remove_when_empty().await;
        let _ = std::fs::remove_dir_all(&sandbox.dirs.root);
    }

    pub fn isolation(&self, sandbox: &LocalSandbox) -> BTreeMap<String, String> {
        let mut out = BTreeMap::from([
            ("provider".to_owned(), "local".to_owned()),
            ("namespaces".to_owned(), "user,mount,pid,net,ipc,uts,cgroup".to_owned()),
            (
                "user".to_owned(),
                format!(
                    "uid {} (host uid {}), no capabilities, no_new_privs",
                    jail::SANDBOX_UID,
                    sandbox.dirs.uid
                ),
            ),
            (
                "seccomp".to_owned(),
                "deny list (mount, namespaces, keyring, bpf, ptrace, modules, reboot, …)".to_owned(),
            ),
            ("root".to_owned(), "minimal: read-only /usr, synthesized /etc, fresh /proc, no /sys".to_owned()),
            ("writable".to_owned(), "/workspace,/tmp".to_owned()),
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

/// The deepest process under `helper` that has stopped itself inside the sandbox's PID
/// namespace (the jail's script, just before it becomes the command).
fn stopped_in_sandbox(helper: u32) -> Option<u32> {
    let mut level = vec![helper];
    for _ in 0..6 {
        let next: Vec<u32> = level.iter().flat_map(|p| procfs::children(*p)).collect();
        if let Some(&pid) = next
            .iter()
            .find(|p| procfs::state(**p) == Some('T') && procfs::ns_pids(**p).len() >= 2 && !is_bwrap(**p))
        {
            return Some(pid);
        }
        if next.is_empty() {
            return None;
        }
        level = next;
    }
    None
}

fn is_bwrap(pid: u32) -> bool {
    procfs::cmdline(pid).first().is_some_and(|arg0| arg0 == "bwrap" || arg0.ends_with("/bwrap"))
}

/// What keeps a host from running sandboxes with `state_dir`, if anything.
pub fn host_problem(state_dir: &Path) -> Option<HostProblem> {
    for tool in ["bwrap", "nsenter", "setpriv", "bash"] {
        if !on_path(tool) {
            return Some(HostProblem::Missing(tool));
        }
    }
    let userns = std::fs::read_to_string("/proc/sys/user/max_user_namespaces").ok();
    if userns.is_some_and(|n| n.trim() == "0") {
        return Some(HostProblem::NoUserNamespaces);
    }
    jail::untraversable(state_dir).map(|closed| HostProblem::StateDirClosed(closed.display().to_string()))
}

fn on_path(tool: &str) -> bool {
    ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        .iter()
        .any(|dir| Path::new(dir).join(tool).is_file())
}
