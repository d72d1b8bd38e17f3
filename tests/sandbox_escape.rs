//! Escape attempts, run as a project key's process would run them: inside a real sandbox of the
//! local provider. Each asserts that the attempt fails inside and that the host is unchanged.
// Test code: a failed expectation should fail the test right there.
#![allow(clippy::expect_used)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentplane_domain::sandbox::SandboxId;
use agentplane_sandbox::local::jail;
use agentplane_tests::sandbox::{Env, Finished, env};
use serde_json::json;

async fn sandbox(env: &Env) -> String {
    env.create(json!({"timeout": 300})).await
}

fn host_dir(env: &Env, sandbox: &str) -> PathBuf {
    env.node.config.state_dir.join("sandboxes").join(sandbox)
}

/// EPERM, EACCES, EROFS: the kernel said no.
const DENIED: &[&str] = &["Operation not permitted", "Permission denied", "Read-only file system"];
/// The tool refused before the system call: the process is not root (uid 1000, no capabilities).
const NOT_ROOT: &[&str] = &["must be superuser", "must be root"];
/// ENOENT: not there to be reached at all (masked, not mounted, another sandbox's path).
const ABSENT: &[&str] = &["No such file or directory", "Directory nonexistent"];
/// The connection was refused or had no route: no host listener is reachable.
const UNREACHABLE: &[&str] = &["Connection refused", "Network is unreachable"];

/// The attempt failed, and for the reason given: its stderr names one of `refusals`. A command
/// that was not found (127) or could not run (126) proves nothing.
#[track_caller]
fn assert_refused(what: &str, finished: &Finished, refusals: &[&str]) {
    assert!(finished.failed(), "{what} succeeded inside the sandbox: {finished:?}");
    assert!(
        !matches!(finished.exit_code, None | Some(126 | 127)),
        "{what} did not run, so refused nothing: {finished:?}"
    );
    assert!(
        refusals.iter().any(|r| finished.stderr.contains(r)),
        "{what} failed, but not with {refusals:?}: {finished:?}"
    );
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test]
async fn remounting_etc_read_write_and_writing_it_fail_and_the_hosts_etc_is_untouched() {
    let env = env().await;
    let sbx = sandbox(&env).await;
    let etc = env.node.config.state_dir.join("etc");
    let passwd = read(etc.join("passwd"));
    let remount = env.run(&sbx, "mount -o remount,bind,rw /etc && touch /etc/agentplane-escape").await;
    assert_refused("remount of /etc", &remount, NOT_ROOT);
    for attempt in [
        "touch /etc/agentplane-escape",
        "echo 'evil:x:0:0::/:/bin/sh' >> /etc/passwd",
        "mkdir /etc/agentplane-escape.d",
        "rm /etc/hosts",
        "touch /usr/agentplane-escape",
        "touch /agentplane-escape",
    ] {
        assert_refused(attempt, &env.run(&sbx, attempt).await, DENIED);
    }
    assert!(!Path::new("/etc/agentplane-escape").exists() && !Path::new("/etc/agentplane-escape.d").exists());
    assert!(!Path::new("/usr/agentplane-escape").exists() && !Path::new("/agentplane-escape").exists());
    assert!(!etc.join("agentplane-escape").exists());
    assert_eq!(read(etc.join("passwd")), passwd, "the synthesized passwd changed");
    assert!(etc.join("hosts").exists());
    assert!(!read("/etc/passwd").contains("evil:"));
    env.kill(&sbx).await;
}

#[tokio::test]
async fn the_hosts_etc_is_not_visible_only_the_synthesized_one() {
    let env = env().await;
    let sbx = sandbox(&env).await;
    let shadow = env.run(&sbx, "cat /etc/shadow").await;
    assert_refused("reading /etc/shadow", &shadow, ABSENT);
    assert!(!shadow.stdout.contains("root:"), "{shadow:?}");
    let listing = env.run(&sbx, "ls -A /etc").await;
    let mut names: Vec<&str> = listing.stdout.split_whitespace().collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["group", "hostname", "hosts", "nsswitch.conf", "passwd", "resolv.conf"],
        "{listing:?}"
    );
    let me = env.run(&sbx, "id -un; id -u; id -g; echo $HOME").await;
    assert_eq!(me.stdout, "user\n1000\n1000\n/workspace\n", "{me:?}");
    env.kill(&sbx).await;
}

#[tokio::test]
async fn processes_are_unprivileged_on_the_host_without_capabilities_and_under_seccomp() {
    let env = env().await;
    let sbx = sandbox(&env).await;
    let status = env
        .run(
            &sbx,
            "grep -E '^(Uid|Gid|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status",
        )
        .await;
    let field = |name: &str| {
        status
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(|v| v.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert_eq!(field("Uid"), ["1000"; 4], "{status:?}");
    for caps in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(field(caps), ["0000000000000000"], "{caps}: {status:?}");
    }
    assert_eq!(field("NoNewPrivs"), ["1"]);
    assert_eq!(field("Seccomp"), ["2"], "seccomp filter mode");
    // On the host, the same process runs as the sandbox's own unprivileged uid, never root.
    let (sleeper, _) = env.start(&sbx, json!({"cmd": "sleep", "args": ["600"]})).await;
    let host_uid = jail::host_id(&sbx.parse::<SandboxId>().expect("sandbox id"));
    assert!(host_uid >= 2_000_000_000);
    let mut seen = false;
    for _ in 0..100 {
        seen = host_processes_running("sleep 600").contains(&host_uid);
        if seen {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen, "no `sleep 600` runs as host uid {host_uid}");
    assert!(!host_processes_running("sleep 600").contains(&0), "a sandbox process runs as host root");
    let _ = sleeper;
    env.kill(&sbx).await;
}

/// Host uids of the processes whose command line is `cmdline`.
fn host_processes_running(cmdline: &str) -> Vec<u32> {
    let mut uids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let dir = entry.path();
        let cmd = std::fs::read(dir.join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.trim_end() == cmdline
            && let Some(uid) = read(dir.join("status"))
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().next().and_then(|u| u.parse().ok()))
        {
            uids.push(uid);
        }
    }
    uids
}

#[tokio::test]
async fn mounting_cgroup_proc_or_tmpfs_fails_and_limits_stay_with_the_node() {
    let env = env().await;
    let sbx = sandbox(&env).await;
    let pids_max = format!("/sys/fs/cgroup/pids/agentplane/{sbx}/pids.max");
    let before = read(&pids_max);
    for (attempt, refusals) in [
        ("mkdir -p /tmp/m && mount -t cgroup -o pids none /tmp/m", NOT_ROOT),
        ("mkdir -p /tmp/m && mount -t cgroup2 none /tmp/m", NOT_ROOT),
        ("mkdir -p /tmp/m && mount -t proc proc /tmp/m", NOT_ROOT),
        ("mkdir -p /tmp/m && mount -t tmpfs tmpfs /tmp/m", NOT_ROOT),
        ("mkdir -p /tmp/m && mount --bind / /tmp/m", NOT_ROOT),
        ("unshare -r -m sh -c 'mount -t tmpfs tmpfs /tmp'", DENIED),
        ("unshare -U true", DENIED),
        ("unshare -n true", DENIED),
        ("ls /sys/fs/cgroup", ABSENT),
        ("echo 100000 > /sys/fs/cgroup/pids/pids.max", ABSENT),
    ] {
        assert_refused(attempt, &env.run(&sbx, attempt).await, refusals);
    }
    // The node's limit is what it set (the node runs on cgroup v1 here, so the file is there);
    // nothing inside could reach it.
    assert!(Path::new(&pids_max).exists(), "the node set no pids limit at {pids_max}");
    assert_eq!(read(&pids_max), before);
    assert_eq!(before.trim(), "512");
    let sys = env.run(&sbx, "test -e /sys && echo present || echo absent").await;
    assert_eq!(sys.stdout.trim(), "absent");
    env.kill(&sbx).await;
}

#[tokio::test]
async fn device_nodes_cannot_be_made() {
    let env = env().await;
    let sbx = sandbox(&env).await;
    for attempt in ["mknod /workspace/mem c 1 1", "mknod /tmp/disk b 8 0", "mknod /workspace/null c 1 3"] {
        assert_refused(attempt, &env.run(&sbx, attempt).await, DENIED);
    }
    let dir = host_dir(&env, &sbx);
    for made in ["workspace/mem", "tmp/disk", "workspace/null"] {
        assert!(!dir.join(made).exists(), "{made} exists on the host");
    }
    env.kill(&sbx).await;
}

#[tokio::test]
async fn kernel_settings_cannot_be_written_through_proc() {
    let env = env().await;
    let sbx = sandbox(&env).await;
    let swappiness = read("/proc/sys/vm/swappiness");
    let hostname = read("/proc/sys/kernel/hostname");
    for (attempt, refusals) in [
        ("echo 1 > /proc/sys/vm/drop_caches", DENIED),
        ("echo 7 > /proc/sys/vm/swappiness", DENIED),
        ("echo pwned > /proc/sys/kernel/hostname", DENIED),
        // Masked: not there at all.
        ("echo h > /proc/sysrq-trigger", ABSENT),
        ("echo 0 > /proc/sys/kernel/randomize_va_space", DENIED),
        ("hostname pwned", NOT_ROOT),
    ] {
        assert_refused(attempt, &env.run(&sbx, attempt).await, refusals);
    }
    assert_eq!(read("/proc/sys/vm/swappiness"), swappiness);
    assert_eq!(read("/proc/sys/kernel/hostname"), hostname);
    let inside = env.run(&sbx, "cat /proc/sys/kernel/hostname").await;
    assert_eq!(inside.stdout.trim(), "sandbox");
    env.kill(&sbx).await;
}

#[tokio::test]
async fn loopback_services_of_the_host_are_unreachable() {
    let env = env().await;
    let sbx = sandbox(&env).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let api_port = env.app.base.rsplit(':').next().unwrap_or_default().trim_end_matches('/').to_owned();
    for target in [format!("127.0.0.1/{port}"), format!("127.0.0.1/{api_port}"), "127.0.0.1/4566".to_owned()]
    {
        let attempt = format!("echo hello > /dev/tcp/{target}");
        let finished = env.run(&sbx, &format!("exec bash -c '{attempt}'")).await;
        assert_refused(&attempt, &finished, UNREACHABLE);
    }
    // Nothing reached the host's listener.
    let mut reached = false;
    for _ in 0..10 {
        if let Ok((mut conn, _)) = listener.accept() {
            let mut buf = String::new();
            let _ = conn.read_to_string(&mut buf);
            reached = true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!reached, "a sandbox process connected to the host's loopback");
    // Its own loopback works: the sandbox has a network namespace of its own.
    let own = env.run(&sbx, "cat /sys/class/net/lo/operstate 2>/dev/null; grep -c . /proc/net/dev").await;
    assert_eq!(own.stdout.lines().last(), Some("3"), "only lo in the sandbox: {own:?}");
    env.kill(&sbx).await;
}

#[tokio::test]
async fn another_sandboxs_files_and_processes_are_invisible() {
    let env = env().await;
    let a = sandbox(&env).await;
    let b = sandbox(&env).await;
    let secret = env.run(&a, "echo top-secret-a > /workspace/secret && echo made").await;
    assert_eq!(secret.stdout.trim(), "made");
    let (_sleeper, _) = env.start(&a, json!({"cmd": "sleep", "args": ["4242"]})).await;
    // From b: none of a's processes, none of a's files, not even through the host path.
    let procs = env.run(&b, "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done").await;
    assert!(!procs.stdout.contains("4242"), "{procs:?}");
    let a_workspace = host_dir(&env, &a).join("workspace").join("secret");
    let probe =
        env.run(&b, &format!("cat {} || cat /proc/*/root/workspace/secret", a_workspace.display())).await;
    assert_refused("reading another sandbox's workspace", &probe, ABSENT);
    assert!(!probe.stdout.contains("top-secret-a"));
    let found = env.run(&b, "grep -rs top-secret-a /workspace /tmp /etc; true").await;
    assert!(!found.stdout.contains("top-secret-a"), "{found:?}");
    // And a sees only its own: its init, its sleeper and the probing shell.
    let own = env.run(&a, "ls -d /proc/[0-9]* | wc -l").await;
    let count: usize = own.stdout.trim().parse().expect("count");
    assert!(count <= 6, "a sees {count} processes: {own:?}");
    env.kill(&a).await;
    env.kill(&b).await;
}

#[tokio::test]
async fn no_host_path_shows_on_any_command_line_inside() {
    let env = env().await;
    let sbx = sandbox(&env).await;
    let (_sleeper, _) = env.start(&sbx, json!({"cmd": "sleep", "args": ["300"]})).await;
    let lines = env.run(&sbx, "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done").await;
    let state = env.node.config.state_dir.display().to_string();
    assert!(!lines.stdout.contains(&state), "{lines:?}");
    assert!(!lines.stdout.contains("/sandboxes/"), "{lines:?}");
    let init = env.run(&sbx, "tr '\\0' ' ' < /proc/1/cmdline").await;
    assert_eq!(init.stdout.trim(), "bwrap --args 3 -- sleep infinity");
    // Nor does a descriptor the node used stay open in a process.
    let fds = env.run(&sbx, "ls /proc/self/fd").await;
    let mut open: Vec<&str> = fds.stdout.split_whitespace().collect();
    open.sort_unstable();
    assert_eq!(open, ["0", "1", "2", "3"], "{fds:?}");
    env.kill(&sbx).await;
}

/// Each denied call made directly (not through a tool that may be missing), printing
/// `name errno`: compiled on the host with the system C compiler, run inside.
const PROBE: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void) {
  struct { const char *name; long nr; long a0; long a1; } calls[] = {
    {"mount", SYS_mount, 0, 0}, {"umount2", SYS_umount2, 0, 0}, {"pivot_root", SYS_pivot_root, 0, 0},
    {"chroot", SYS_chroot, 0, 0}, {"unshare", SYS_unshare, CLONE_NEWUSER, 0},
    {"setns", SYS_setns, 0, 0}, {"keyctl", SYS_keyctl, 0, -1}, {"add_key", SYS_add_key, 0, 0},
    {"request_key", SYS_request_key, 0, 0}, {"bpf", SYS_bpf, 0, 0},
    {"perf_event_open", SYS_perf_event_open, 0, 0}, {"userfaultfd", SYS_userfaultfd, 0, 0},
    {"io_uring_setup", SYS_io_uring_setup, 1, 0}, {"ptrace", SYS_ptrace, 0, 0},
    {"process_vm_readv", SYS_process_vm_readv, 1, 0}, {"kcmp", SYS_kcmp, 1, 1},
    {"init_module", SYS_init_module, 0, 0}, {"finit_module", SYS_finit_module, -1, 0},
    {"delete_module", SYS_delete_module, 0, 0}, {"reboot", SYS_reboot, 0, 0},
    {"kexec_load", SYS_kexec_load, 0, 0}, {"swapon", SYS_swapon, 0, 0},
    {"syslog", SYS_syslog, 3, 0}, {"open_by_handle_at", SYS_open_by_handle_at, -1, 0},
    {"clone_newuser", SYS_clone, CLONE_NEWUSER | SIGCHLD, 0},
    {"clone_newns", SYS_clone, CLONE_NEWNS | SIGCHLD, 0},
    {"clone_newnet", SYS_clone, CLONE_NEWNET | SIGCHLD, 0},
    {"clone3", SYS_clone3, 0, 0},
  };
  for (unsigned i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    errno = 0;
    long r = syscall(calls[i].nr, calls[i].a0, calls[i].a1, 0, 0, 0, 0);
    if (r == 0 && calls[i].nr == SYS_clone) _exit(0);
    printf("%s %d\n", calls[i].name, r < 0 ? errno : 0);
  }
  return 0;
}
"#;

#[tokio::test]
async fn seccomp_refuses_each_denied_call_and_the_sandbox_still_works() {
    let env = env().await;
    let sbx = sandbox(&env).await;
    let dir = host_dir(&env, &sbx);
    let source = dir.join("run").join("probe.c");
    std::fs::write(&source, PROBE).expect("write probe");
    let built = std::process::Command::new("cc")
        .arg("-o")
        .arg(dir.join("workspace").join("probe"))
        .arg(&source)
        .output()
        .expect("cc");
    assert!(built.status.success(), "cc: {}", String::from_utf8_lossy(&built.stderr));
    // Whatever the umask, the sandbox user must be able to run it.
    std::fs::set_permissions(
        dir.join("workspace").join("probe"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod probe");
    let probe = env.run(&sbx, "/workspace/probe").await;
    assert_eq!(probe.exit_code, Some(0), "{probe:?}");
    let lines: Vec<(&str, i32)> = probe
        .stdout
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(name, errno)| (name, errno.parse().expect("errno")))
        .collect();
    assert_eq!(lines.len(), 28, "{probe:?}");
    for (name, errno) in lines {
        let expected = if name == "clone3" { 38 } else { 1 }; // ENOSYS, EPERM
        assert_eq!(errno, expected, "{name} answered errno {errno}: {probe:?}");
    }
    // What a sandbox is for still works: files, pipes, threads (libc falls back from clone3
    // to clone), its own loopback, /tmp shared between processes.
    let work = env
        .run(
            &sbx,
            "echo data > /workspace/f && cat /workspace/f | tr a-z A-Z && echo shared > /tmp/t && \
             sort --parallel=4 -S 1M /workspace/f >/dev/null && echo threads-ok",
        )
        .await;
    assert_eq!(work.stdout, "DATA\nthreads-ok\n", "{work:?}");
    assert_eq!(env.run(&sbx, "cat /tmp/t").await.stdout, "shared\n");
    // A working directory that does not exist is the process's own failure, not the node's.
    let (missing_dir, _) = env.start(&sbx, json!({"cmd": "true", "cwd": "/workspace/not-there"})).await;
    let exited = env.wait_exit(&sbx, &missing_dir).await;
    assert_eq!(exited["exitCode"], 1, "{exited}");
    env.kill(&sbx).await;
}
