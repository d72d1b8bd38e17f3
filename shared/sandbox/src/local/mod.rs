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

    pub async fn create(
        &self,
        id: &SandboxId,
        env_vars: BTreeMap<String, String>,
    ) -> Result<LocalSandbox, String> {
        let files = self.files()?;
        if let Some(problem) = self.host_problem() {
            return Err(problem.to_string());
        }
        let created = self.try_create(files, id, env_vars).await;
        if created.is_err() {
            // Nothing of a sandbox that did not come up may stay: processes, cgroup, disk.
            self.remove_leftovers(id).await;
        }
        created
    }

    async fn try_create(
        &self,
        files: &NodeFiles,
        id: &SandboxId,
        env_vars: BTreeMap<String, String>,
    ) -> Result<LocalSandbox, String> {
        let dirs = self.sandbox_dirs(id);
        dirs.prepare().map_err(|e| format!("preparing the sandbox's directories: {e}"))?;
        if let Some(bytes) = self.disk_bytes {
            let (root, uid) = (dirs.root.clone(), dirs.uid);
            tokio::task::spawn_blocking(move || disk::attach(&root, uid, bytes))
                .await
                .unwrap_or_else(|e| Err(e.to_string()))
                .map_err(|err| format!("making the sandbox's disk: {err}"))?;
        }
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
        let held = init.and_then(|init| Some((HostProcess::open_now(outer)?, HostProcess::open_now(init)?)));
        let Some((outer, init)) = held else {
            let _ = child.start_kill();
            cgroup.remove_when_empty().await;
            return Err("the sandbox's namespaces did not come up".into());
        };
        // Reaped in the background by tokio once it exits; the sandbox outlives this handle.
        drop(child);
        let record = format!("{} {}", outer.record(), init.record());
        let sandbox = LocalSandbox::new(id, dirs.clone(), cgroup, (outer, init), env_vars);
        let written = std::fs::write(dirs.root.join(INIT_RECORD), record);
        match (sandbox, written) {
            (Some(sandbox), Ok(())) => Ok(sandbox),
            (sandbox, written) => {
                if let Some(sandbox) = sandbox {
                    self.destroy(&sandbox).await;
                }
                Err(match written {
                    Err(e) => format!("recording the sandbox's init: {e}"),
                    Ok(()) => "the sandbox's init ended as it started".into(),
                })
            }
        }
    }

    /// Finds a sandbox a previous daemon created, if its init still runs: the recorded pids
    /// are taken only while they still name the processes that started at the recorded times,
    /// so a pid reused by another host process is never adopted (nor later signalled).
    pub fn adopt(&self, id: &SandboxId, env_vars: BTreeMap<String, String>) -> Option<LocalSandbox> {
        let dirs = self.sandbox_dirs(id);
        let text = std::fs::read_to_string(dirs.root.join(INIT_RECORD)).ok()?;
        let mut records = text.split_whitespace();
        let (outer, init) = (records.next()?, records.next()?);
        let init = HostProcess::open_record(init)?;
        if init.has_exited() {
            return None;
        }
        // The outer bwrap may be gone while the init runs (it is only its parent).
        let outer = HostProcess::open_record(outer).or_else(|| HostProcess::open_record(&init.record()))?;
        let mode = cgroup::Mode::detect();
        let group = Cgroup::named(id.as_str(), mode);
        let cgroup = if group.pids().contains(&init.pid()) {
            group
        } else {
            Cgroup::named(id.as_str(), cgroup::Mode::None)
        };
        LocalSandbox::new(id, dirs, cgroup, (outer, init), env_vars)
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
        let (mut command, args_file) = jail::process_command(
            files,
            &sandbox.dirs,
            &sandbox.cgroup.join_script(),
            sandbox.init.pid(),
            &spec,
        )
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
            if let Some(inner) = stopped_in_sandbox(helper).and_then(HostProcess::open_now) {
                let pid = procfs::ns_pids(inner.pid()).last().copied().unwrap_or(0);
                // It entered namespaces through the init's pid: were they still the init's? If
                // the init had ended and its pid been reused, they are another process's.
                if Namespaces::of(inner.pid()).as_ref() != Some(&sandbox.namespaces)
                    || sandbox.init.has_exited()
                {
                    inner.kill();
                    let _ = child.start_kill();
                    return Err(INIT_ENDED.into());
                }
                if inner.resume() {
                    return Ok(Started { child, pid, ended_by_node: sandbox.ended_by_node.clone() });
                }
            }
            if let Ok(Some(status)) = child.try_wait() {
                if sandbox.init.has_exited() {
                    return Err(INIT_ENDED.into());
                }
                let mut err = String::new();
                if let Some(mut stderr) = child.stderr.take() {
                    let _ = stderr.read_to_string(&mut err).await;
                }
                // The node's own steps name host paths and pids: logged, not answered.
                tracing::warn!(sandbox = %sandbox.id, %status, stderr = %err.trim(), "a process could not enter its sandbox");
                return Err(format!("the process could not enter the sandbox ({status})"));
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
        let sleeper: Vec<u32> = procfs::children(sandbox.init.pid());
        let mut out = Vec::new();
        for host in sandbox.cgroup.pids() {
            if host == sandbox.outer.pid() || host == sandbox.init.pid() || sleeper.contains(&host) {
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

    /// Kills every process (the PID namespace dies with its init; the node's helpers in the
    /// cgroup are killed too), removes the cgroup and the workspace. Every signal goes through
    /// a pidfd: a process that already ended is never mistaken for whatever reused its pid.
    pub async fn destroy(&self, sandbox: &LocalSandbox) {
        sandbox.ended_by_node.store(true, Ordering::SeqCst);
        if sandbox.cgroup.can_freeze() {
            let _ = sandbox.cgroup.thaw().await;
        }
        sandbox.init.kill();
        sandbox.outer.kill();
        let deadline = Instant::now() + START_WITHIN;
        while Instant::now() < deadline {
            let members = sandbox.cgroup.pids();
            if members.is_empty() && sandbox.init.has_exited() {
                break;
            }
            sandbox.cgroup.kill_members(&members);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        sandbox.cgroup.remove_when_empty().await;
        remove_dirs(&sandbox.dirs.root).await;
    }

    /// Removes what is left of a sandbox whose init is gone (none of it is adopted): any
    /// process still in its cgroup (through pidfds, see [`Cgroup::kill_members`]), the cgroup,
    /// its directories.
    pub async fn remove_leftovers(&self, id: &SandboxId) {
        let dirs = self.sandbox_dirs(id);
        let group = Cgroup::named(id.as_str(), cgroup::Mode::detect());
        for _ in 0..500 {
            let members = group.pids();
            if members.is_empty() {
                break;
            }
            group.kill_members(&members);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        group.remove_when_empty().await;
        remove_dirs(&dirs.root).await;
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

/// Ends what is left of sandbox `id` under `state_dir` without a daemon (a test's cleanup):
/// its recorded init and outer bwrap, through pidfds and only while the records still name
/// them; then every process left in its cgroup. Returns once nothing of it runs (or after 5 s).
pub fn end_leftover(state_dir: &Path, id: &str) {
    let root = state_dir.join("sandboxes").join(id);
    let text = std::fs::read_to_string(root.join(INIT_RECORD)).unwrap_or_default();
    for held in text.split_whitespace().filter_map(HostProcess::open_record) {
        held.kill();
    }
    let group = Cgroup::named(id, cgroup::Mode::detect());
    for _ in 0..500 {
        let members = group.pids();
        if members.is_empty() {
            break;
        }
        group.kill_members(&members);
        std::thread::sleep(Duration::from_millis(10));
    }
    group.remove();
    disk::detach(&root);
}

/// Removes a sandbox's directories, its disk unmounted first.
async fn remove_dirs(root: &Path) {
    let root = root.to_owned();
    let _ = tokio::task::spawn_blocking(move || {
        disk::detach(&root);
        let _ = std::fs::remove_dir_all(&root);
    })
    .await;
}

/// Why a process could not start: the sandbox's init has ended (and every process with it).
pub const INIT_ENDED: &str = "the sandbox has ended: its init process exited";

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
    tool_path(tool).is_some()
}

/// Where `tool` is among the host's system directories.
fn tool_path(tool: &str) -> Option<PathBuf> {
    ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(tool))
        .find(|path| path.is_file())
}
