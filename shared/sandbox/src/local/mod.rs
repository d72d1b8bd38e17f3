//! The local provider: each sandbox is a jailed set of processes on this host — its own user,
//! PID, network, IPC, UTS, cgroup and mount namespaces, an unprivileged host uid, a minimal
//! root with only `/workspace` and `/tmp` writable (on the sandbox's own [`disk`]), seccomp —
//! placed in the sandbox's cgroup.
//! [`jail`] says exactly what a process sees and may do.
//!
//! A sandbox has one long-lived init (`bwrap … sleep infinity`) that owns its namespaces; every
//! process joins them, so all processes of a sandbox share one PID namespace and one cgroup.
//! Nothing is tied to the daemon's lifetime: after a daemon restart the sandbox and its
//! processes are still there to be found.

pub mod cgroup;
pub mod disk;
pub mod host_process;
pub mod jail;
mod lifecycle;
mod processes;
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
use self::host_process::HostProcess;
use self::jail::{NodeFiles, ProcessSpec, SandboxDirs};

pub use lifecycle::end_leftover;
pub use processes::INIT_ENDED;

/// How long a process may take to reach its first instruction inside the sandbox, and the
/// sandbox's init to bring up its namespaces (generous: a loaded host is slow, not broken).
const START_WITHIN: Duration = Duration::from_secs(15);

#[derive(Debug, Clone)]
pub struct LocalProvider {
    state_dir: PathBuf,
    limits: Limits,
    /// Each sandbox's disk (`/workspace` and `/tmp` together) in bytes; `None`: no disk of its
    /// own, they write to the host's filesystem unbounded.
    disk_bytes: Option<u64>,
    files: Arc<OnceLock<Result<NodeFiles, String>>>,
}

/// A sandbox's disk unless configured otherwise: 10 GiB.
pub const DEFAULT_DISK_MB: u64 = 10 * 1024;

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
    /// The outer bwrap and the namespace's init (PID 1 inside), held through pidfds.
    outer: HostProcess,
    init: HostProcess,
    /// The init's PID and network namespaces (`pid:[…]`, `net:[…]`): every process started in
    /// the sandbox must be in these, whatever its init's pid names by then.
    namespaces: Namespaces,
    pub env_vars: BTreeMap<String, String>,
    /// Set once the node has begun killing the sandbox: the exits that follow are its SIGKILL.
    ended_by_node: Arc<AtomicBool>,
}

impl LocalSandbox {
    fn new(
        id: &SandboxId,
        dirs: SandboxDirs,
        cgroup: Cgroup,
        (outer, init): (HostProcess, HostProcess),
        env_vars: BTreeMap<String, String>,
    ) -> Option<Self> {
        let namespaces = Namespaces::of(init.pid())?;
        // Read through the pid: still the init's only if it has not ended meanwhile.
        if init.has_exited() {
            return None;
        }
        Some(Self {
            id: id.clone(),
            dirs,
            cgroup,
            outer,
            init,
            namespaces,
            env_vars,
            ended_by_node: Arc::default(),
        })
    }

    /// Resolves once the sandbox's init has exited: its PID namespace, and every process in
    /// it, ended with it.
    pub async fn init_exited(&self) {
        self.init.exited().await;
    }

    /// Whether the node itself ended the sandbox (kill, deadline).
    pub fn ended_by_node(&self) -> bool {
        self.ended_by_node.load(Ordering::SeqCst)
    }

    /// The host directory mounted at the sandbox's `/workspace`, and the uid owning it.
    pub fn workspace(&self) -> (PathBuf, u32) {
        (self.dirs.workspace(), self.dirs.uid)
    }
}

/// The namespaces of a process, as `/proc/<pid>/ns/*` names them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Namespaces {
    pid: PathBuf,
    net: PathBuf,
}

impl Namespaces {
    fn of(pid: u32) -> Option<Self> {
        let ns = |kind: &str| std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).ok();
        Some(Self { pid: ns("pid")?, net: ns("net")? })
    }
}

/// The file recording a sandbox's outer bwrap and init (`pid@start pid@start`), for a
/// restarted daemon to find them again.
const INIT_RECORD: &str = "init.id";

/// A process just started, stopped at its first instruction until `release`d, so its pid is
/// known even when it would exit at once.
pub struct Started {
    pub child: Child,
    /// The process's pid inside the sandbox.
    pub pid: u32,
    /// The process itself (its pidfd): what a signal sent to it reaches.
    pub inner: HostProcess,
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
        Self {
            state_dir: state_dir.into(),
            limits: Limits::default(),
            disk_bytes: Some(DEFAULT_DISK_MB * 1024 * 1024),
            files: Arc::new(OnceLock::new()),
        }
    }

    /// Gives each sandbox a disk of `mb` MiB (0: none, unbounded on the host's filesystem).
    pub fn with_disk_mb(mut self, mb: u64) -> Self {
        self.disk_bytes = (mb > 0).then(|| mb.saturating_mul(1024 * 1024));
        self
    }

    fn sandbox_dirs(&self, id: &SandboxId) -> SandboxDirs {
        SandboxDirs::new(self.state_dir.join("sandboxes").join(id.as_str()), id)
    }

    /// Whether this node holds anything of the sandbox: false for one Core lists as hosted
    /// whose create command the node has not run yet (it is created when that command comes).
    pub fn has_local_state(&self, id: &SandboxId) -> bool {
        self.sandbox_dirs(id).root.exists()
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
        if self.disk_bytes.is_some()
            && let Some(tool) = ["mkfs.ext4", "mount", "umount"].into_iter().find(|t| tool_path(t).is_none())
        {
            return Some(HostProblem::Missing(tool));
        }
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
            (
                "dev".to_owned(),
                "read-only: null, zero, full, random, urandom, tty, pts; a writable /dev/shm (64 MiB tmpfs)"
                    .to_owned(),
            ),
            ("cgroup".to_owned(), sandbox.cgroup.mode.as_str().to_owned()),
        ]);
        match self.disk_bytes {
            Some(bytes) => {
                out.insert("disk_size_mb".into(), (bytes / (1024 * 1024)).to_string());
                out.insert(
                    "disk".into(),
                    "ext4, loop-mounted: /workspace and /tmp share it; full: ENOSPC".into(),
                );
            }
            None => {
                out.insert(
                    "disk".into(),
                    "none: /workspace and /tmp write to the host's filesystem, unbounded".into(),
                );
            }
        }
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
    tool_path(tool).is_some()
}

/// Where `tool` is among the host's system directories.
fn tool_path(tool: &str) -> Option<PathBuf> {
    ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(tool))
        .find(|path| path.is_file())
}
