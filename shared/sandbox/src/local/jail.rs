//! How a sandbox is jailed: who its processes are, what they see, what they may call.
//!
//! - **Identity.** Each sandbox has its own user namespace whose only mapping is the sandbox
//!   user (uid/gid 1000 inside) to one unprivileged host uid owned by this sandbox
//!   ([`host_id`]), never host root. Every process runs as that user with no capabilities (the
//!   bounding set too), `no_new_privs`, and the [`seccomp`](super::seccomp) filters.
//! - **Namespaces.** A long-lived init (`bwrap … sleep infinity`, started as the sandbox's host
//!   uid) owns the sandbox's user, PID, network, IPC, UTS and cgroup namespaces. A process joins
//!   the network, IPC, UTS and cgroup namespaces through `nsenter` (as the node), then drops to
//!   the sandbox's host uid and lets bubblewrap join the user and PID namespaces and build a
//!   fresh mount namespace for it.
//! - **Root filesystem.** Built from nothing: `/usr` and the `/bin`, `/lib*`, `/sbin` links
//!   read-only; a synthesized `/etc` (passwd, group, hosts, resolv.conf, nsswitch.conf) shared
//!   read-only by the node's sandboxes; the sandbox's own `/workspace` and `/tmp`; a fresh
//!   `/proc` of its PID namespace; a read-only `/dev` with only the device nodes a process needs
//!   (and a small `/dev/shm` tmpfs). No `/sys`, so no cgroup hierarchy.
//! - **No host paths on command lines.** bubblewrap reads its arguments from a file descriptor
//!   (`--args`), so the init visible as PID 1 inside reads `bwrap --args 3 -- sleep infinity`.
//!
//! Every directory the node creates gets its mode set explicitly (the node's umask does not
//! matter); the state directory's ancestors must be searchable by others ([`untraversable`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use agentplane_domain::sandbox::SandboxId;
use tokio::process::Command;

use super::seccomp;

/// The sandbox user's uid and gid inside its user namespace.
pub const SANDBOX_UID: u32 = 1000;
/// The `PATH` a process starts with unless it sets its own.
pub const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The host's search path for the node's own tools (sh, bwrap, nsenter, setpriv).
const HOST_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Host uids from here on are given to sandboxes, one each: above what distributions hand
/// out to users and services, below the 32-bit overflow ids.
const HOST_ID_BASE: u64 = 2_000_000_000;
const HOST_ID_SPAN: u64 = 100_000_000;

/// The unprivileged host uid (and gid) a sandbox's processes run as, derived from its id
/// (FNV-1a), so that a restarted node finds the same one.
pub fn host_id(sandbox: &SandboxId) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in sandbox.as_str().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    u32::try_from(HOST_ID_BASE + hash % HOST_ID_SPAN).unwrap_or(u32::MAX - 1)
}

/// The files the node writes once and every sandbox reads: the synthesized `/etc` and the
/// compiled seccomp programs.
#[derive(Debug)]
pub struct NodeFiles {
    etc: PathBuf,
    deny: PathBuf,
    clone3: PathBuf,
}

const ETC: &[(&str, &str)] = &[
    (
        "passwd",
        "root:x:0:0:root:/root:/usr/sbin/nologin\nuser:x:1000:1000:sandbox user:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    ),
    ("group", "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n"),
    ("hosts", "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n"),
    ("hostname", "sandbox\n"),
    ("resolv.conf", "# The sandbox has no network beyond its own loopback.\n"),
    ("nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"),
];

impl NodeFiles {
    pub fn prepare(state_dir: &Path) -> std::io::Result<Self> {
        dir(state_dir, 0o711)?;
        searchable(state_dir)?;
        let etc = state_dir.join("etc");
        dir(&etc, 0o755)?;
        for (name, text) in ETC {
            file(&etc.join(name), text.as_bytes(), 0o644)?;
        }
        let filters = seccomp::compile().map_err(std::io::Error::other)?;
        let seccomp_dir = state_dir.join("seccomp");
        dir(&seccomp_dir, 0o700)?;
        let (deny, clone3) = (seccomp_dir.join("deny.bpf"), seccomp_dir.join("clone3.bpf"));
        file(&deny, &filters.deny, 0o600)?;
        file(&clone3, &filters.clone3, 0o600)?;
        Ok(Self { etc, deny, clone3 })
    }
}

/// The host side of one sandbox: `<state>/sandboxes/<id>/` with its `workspace/` and `tmp/`
/// (owned by the sandbox's host uid, private to it) and `run/` (the node's argument files).
#[derive(Debug, Clone)]
pub struct SandboxDirs {
    pub root: PathBuf,
    pub uid: u32,
}

impl SandboxDirs {
    pub fn new(root: PathBuf, sandbox: &SandboxId) -> Self {
        Self { root, uid: host_id(sandbox) }
    }

    pub fn workspace(&self) -> PathBuf {
        self.root.join("workspace")
    }

    fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    fn run(&self) -> PathBuf {
        self.root.join("run")
    }

    pub fn prepare(&self) -> std::io::Result<()> {
        if let Some(parent) = self.root.parent() {
            dir(parent, 0o711)?;
            searchable(parent)?;
        }
        dir(&self.root, 0o711)?;
        dir(&self.run(), 0o700)?;
        for own in [self.workspace(), self.tmp()] {
            dir(&own, 0o700)?;
            std::os::unix::fs::chown(&own, Some(self.uid), Some(self.uid))?;
        }
        Ok(())
    }

    /// Writes bubblewrap's arguments, NUL-separated, to a file only the node reads.
    fn write_args(&self, name: &str, args: &[String]) -> std::io::Result<PathBuf> {
        let path = self.run().join(name);
        let mut bytes = Vec::new();
        for arg in args {
            bytes.extend_from_slice(arg.as_bytes());
            bytes.push(0);
        }
        file(&path, &bytes, 0o600)?;
        Ok(path)
    }
}

/// The size of each process's `/dev/shm`.
pub const SHM_BYTES: u64 = 64 * 1024 * 1024;

/// Who every process of a sandbox is inside: the sandbox user, no capabilities.
const IDENTITY: [&str; 6] = ["--uid", "1000", "--gid", "1000", "--cap-drop", "ALL"];

/// `/usr` and the top-level links (or read-only binds where the host has real directories),
/// then the synthesized `/etc`.
fn system_mounts(etc: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec!["--ro-bind".into(), "/usr".into(), "/usr".into()];
    for top in ["bin", "lib", "lib32", "lib64", "libx32", "sbin"] {
        let host = Path::new("/").join(top);
        if let Ok(target) = std::fs::read_link(&host) {
            args.extend(["--symlink".into(), target.display().to_string(), format!("/{top}")]);
        } else if host.is_dir() {
            args.extend(["--ro-bind".into(), format!("/{top}"), format!("/{top}")]);
        }
    }
    args.extend(["--ro-bind".into(), etc.display().to_string(), "/etc".into()]);
    args
}

/// Closes every descriptor above 2 that the node inherited from whatever started it: none of
/// them may reach bubblewrap or the sandbox. bash, because dash cannot name descriptors above 9.
const CLOSE_INHERITED: &str = "for fd in /proc/$$/fd/*; do fd=${fd##*/}; case $fd in 0|1|2) ;; *) eval \"exec $fd<&-\" 2>/dev/null ;; esac; done; ";

/// The init: owns the namespaces and sleeps. Returns the command to spawn (its pid is the
/// outer bwrap; the namespace's PID 1 is its child).
pub fn init_command(
    files: &NodeFiles,
    dirs: &SandboxDirs,
    cgroup_join: &str,
) -> std::io::Result<(Command, PathBuf)> {
    let mut args: Vec<String> = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup",
        "--hostname",
        "sandbox",
    ]
    .map(String::from)
    .to_vec();
    args.extend(IDENTITY.map(String::from));
    args.extend(system_mounts(&files.etc));
    args.extend(["--remount-ro", "/", "--chdir", "/"].map(String::from));
    let args_file = dirs.write_args("init.args", &args)?;
    let uid = dirs.uid.to_string();
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(format!(
            "{CLOSE_INHERITED}{cgroup_join}exec 3<\"$1\" && exec setpriv --reuid \"$2\" --regid \"$2\" --clear-groups -- bwrap --args 3 -- sleep infinity"
        ))
        .args(["sh".as_ref(), args_file.as_os_str(), uid.as_ref()])
        .env_clear()
        .env("PATH", HOST_PATH)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    Ok((command, args_file))
}

/// The script bubblewrap runs as the sandbox user: closes every descriptor the node passed,
/// stops until the node has read its pid, enters the working directory (a missing one is the
/// process's own failure: exit 1 with the shell's message), then becomes the command.
const INNER: &str =
    "exec 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-; kill -STOP $$; cd -- \"$1\" || exit 1; shift; exec \"$@\"";

/// One process in the sandbox whose init is `init` (host pid).
pub struct ProcessSpec<'a> {
    pub cwd: &'a str,
    pub cmd: &'a str,
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
}

pub fn process_command(
    files: &NodeFiles,
    dirs: &SandboxDirs,
    cgroup_join: &str,
    init: u32,
    spec: &ProcessSpec<'_>,
) -> std::io::Result<(Command, PathBuf)> {
    let mut args: Vec<String> =
        ["--userns", "6", "--pidns", "7", "--new-session", "--add-seccomp-fd", "4", "--add-seccomp-fd", "5"]
            .map(String::from)
            .to_vec();
    args.extend(IDENTITY.map(String::from));
    args.extend(system_mounts(&files.etc));
    args.extend([
        "--bind".into(),
        dirs.workspace().display().to_string(),
        "/workspace".into(),
        "--bind".into(),
        dirs.tmp().display().to_string(),
        "/tmp".into(),
        "--proc".into(),
        "/proc".into(),
        "--dev".into(),
        "/dev".into(),
        // POSIX shared memory: a small tmpfs (memory, charged to the sandbox's cgroup).
        "--perms".into(),
        "1777".into(),
        "--size".into(),
        SHM_BYTES.to_string(),
        "--tmpfs".into(),
        "/dev/shm".into(),
        // Only the device nodes (and pts, shm) stay writable.
        "--remount-ro".into(),
        "/dev".into(),
        "--remount-ro".into(),
        "/".into(),
        "--chdir".into(),
        "/workspace".into(),
        "--clearenv".into(),
    ]);
    let mut env: BTreeMap<&str, &str> =
        BTreeMap::from([("PATH", PATH), ("HOME", "/workspace"), ("TMPDIR", "/tmp"), ("USER", "user")]);
    env.extend(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    for (k, v) in env {
        args.extend(["--setenv".into(), k.to_owned(), v.to_owned()]);
    }
    let args_file = dirs.write_args(&format!("{}.args", uuid::Uuid::new_v4().simple()), &args)?;
    let (init, uid) = (init.to_string(), dirs.uid.to_string());
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(format!(
            "{CLOSE_INHERITED}{cgroup_join}exec 3<\"$1\" 4<\"$2\" 5<\"$3\" 6<\"/proc/$4/ns/user\" 7<\"/proc/$4/ns/pid\" && \
             init=$4 uid=$5 && shift 5 && \
             exec nsenter -t \"$init\" -n -i -u -C -- setpriv --reuid \"$uid\" --regid \"$uid\" --clear-groups -- bwrap --args 3 -- /bin/sh -c \"$INNER\" sh \"$@\""
        ))
        .args([
            "sh".as_ref(),
            args_file.as_os_str(),
            files.deny.as_os_str(),
            files.clone3.as_os_str(),
            init.as_ref(),
            uid.as_ref(),
            spec.cwd.as_ref(),
            spec.cmd.as_ref(),
        ])
        .args(spec.args)
        .env_clear()
        .env("PATH", HOST_PATH)
        .env("INNER", INNER)
        .current_dir("/");
    Ok((command, args_file))
}

/// The first ancestor of `path` (or `path` itself) that others cannot search: the sandbox's
/// host uid could not reach its workspace through it.
pub fn untraversable(path: &Path) -> Option<PathBuf> {
    let mut here = PathBuf::new();
    for part in path.components() {
        here.push(part);
        match std::fs::metadata(&here) {
            Ok(meta) if meta.permissions().mode() & 0o001 == 0 => return Some(here),
            Ok(_) => {}
            // Not created yet: the node creates it with the right mode.
            Err(_) => return None,
        }
    }
    None
}

/// Creates `path` and whatever of its parents is missing, each with `mode` whatever the umask.
/// A directory that already exists keeps its mode (it may be shared, `/tmp` say).
fn dir(path: &Path, mode: u32) -> std::io::Result<()> {
    let mut missing = Vec::new();
    let mut here = Some(path);
    while let Some(p) = here.filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
        missing.push(p);
        here = p.parent();
    }
    for p in missing.into_iter().rev() {
        match std::fs::create_dir(p) {
            Ok(()) => std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Lets others search `path` (adds the x bits; nothing else changes): the node's own
/// directories on the way to a workspace, even when something else made them under a tight umask.
fn searchable(path: &Path) -> std::io::Result<()> {
    let mode = std::fs::metadata(path)?.permissions().mode();
    if mode & 0o111 != 0o111 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode((mode | 0o111) & 0o7777))?;
    }
    Ok(())
}

fn file(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(path)?;
    f.write_all(bytes)?;
    f.set_permissions(std::fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_host_id_is_stable_unprivileged_and_spread() {
        let a = SandboxId::from_random([1; 16]);
        let b = SandboxId::from_random([2; 16]);
        assert_eq!(host_id(&a), host_id(&a));
        assert_ne!(host_id(&a), host_id(&b));
        for id in [host_id(&a), host_id(&b)] {
            assert!((2_000_000_000..2_100_000_000).contains(&id));
        }
    }

    #[test]
    fn a_closed_ancestor_is_found() {
        let base = Path::new("/tmp").join(format!("jail-test-{}", uuid::Uuid::new_v4().simple()));
        let closed = base.join("closed");
        dir(&closed.join("state"), 0o755).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(untraversable(&closed.join("state")), Some(closed.clone()));
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o711)).unwrap();
        assert_eq!(untraversable(&closed.join("state")), None);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
