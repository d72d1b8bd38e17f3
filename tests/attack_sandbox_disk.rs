//! Attacks on a sandbox's storage (issue 24, item 6): filling `/workspace` or `/tmp` must fill
//! the sandbox's own disk (ENOSPC for the writer) and never the host's filesystem or the node;
//! `/dev` is read-only apart from the device nodes a process needs.
// Test code: a failed expectation should fail the test right there.
#![allow(clippy::expect_used)]

use agentplane_tests::sandbox::{Env, env};
use reqwest::Method;
use serde_json::json;

/// The size in MiB of the filesystem holding `path` inside the sandbox.
async fn filesystem_mb(env: &Env, sandbox: &str, path: &str) -> u64 {
    let stat = env.run(sandbox, &format!("stat -f -c '%b %S' {path}")).await;
    let fields: Vec<u64> = stat.stdout.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    assert_eq!(fields.len(), 2, "{stat:?}");
    fields[0] * fields[1] / (1024 * 1024)
}

#[tokio::test]
async fn a_sandbox_has_a_disk_of_its_own_of_at_most_ten_gib_and_reports_it() {
    let env = env().await;
    let sbx = env.create(json!({"timeout": 300})).await;
    let (_, body) = env.call(Method::GET, &format!("/sandboxes/{sbx}"), None).await;
    assert_eq!(body["diskSizeMB"], 10240, "{body}");
    // /workspace and /tmp are that disk, not the host's filesystem (far larger here).
    let host_mb = {
        let stat = std::process::Command::new("stat")
            .args(["-f", "-c", "%b %S"])
            .arg(&env.node.config.state_dir)
            .output()
            .expect("stat");
        let text = String::from_utf8_lossy(&stat.stdout).into_owned();
        let fields: Vec<u64> = text.split_whitespace().filter_map(|f| f.parse().ok()).collect();
        fields[0] * fields[1] / (1024 * 1024)
    };
    for path in ["/workspace", "/tmp"] {
        let mb = filesystem_mb(&env, &sbx, path).await;
        assert!(mb <= 10240, "{path} is {mb} MiB");
        assert_ne!(mb, host_mb, "{path} is the host's filesystem");
    }
    let same = env.run(&sbx, "test \"$(stat -c %d /workspace)\" = \"$(stat -c %d /tmp)\"").await;
    assert!(!same.failed(), "/workspace and /tmp are not one disk: {same:?}");
    env.kill(&sbx).await;
}

#[tokio::test]
async fn filling_the_disk_fails_the_writer_with_enospc_and_never_the_node() {
    let mut env = env().await;
    env.node.config.disk_size_mb = 64;
    env.node.restart(&env.app).await.expect("restart");
    let sbx = env.create(json!({"timeout": 300})).await;
    let (_, body) = env.call(Method::GET, &format!("/sandboxes/{sbx}"), None).await;
    assert_eq!(body["diskSizeMB"], 64, "{body}");
    let host_dir = env.node.config.state_dir.join("sandboxes").join(&sbx);

    let fill = env.run(&sbx, "head -c 100M /dev/zero > /workspace/fill").await;
    assert!(fill.failed(), "100 MiB fit a 64 MiB disk: {fill:?}");
    assert!(fill.stderr.contains("No space left on device"), "{fill:?}");
    let more = env.run(&sbx, "head -c 1M /dev/zero > /tmp/more").await;
    assert!(more.failed() && more.stderr.contains("No space left on device"), "{more:?}");
    // On the host, the file is no bigger than the disk.
    let written = std::fs::metadata(host_dir.join("workspace").join("fill")).expect("fill").len();
    assert!(written <= 64 * 1024 * 1024, "{written} bytes in a 64 MiB disk");

    // The node goes on: processes start, its own files are elsewhere, and freeing space works.
    let alive = env.run(&sbx, "echo alive").await;
    assert_eq!(alive.stdout, "alive\n", "{alive:?}");
    let freed = env.run(&sbx, "rm /workspace/fill && echo again > /tmp/again && cat /tmp/again").await;
    assert_eq!(freed.stdout, "again\n", "{freed:?}");
    env.kill(&sbx).await;
}

#[tokio::test]
async fn dev_is_read_only_but_its_device_nodes_work() {
    let env = env().await;
    let sbx = env.create(json!({"timeout": 300})).await;
    for attempt in
        ["echo x > /dev/probe", "mkdir /dev/probe.d", "ln -s /workspace /dev/probe.l", "rm /dev/null"]
    {
        let refused = env.run(&sbx, attempt).await;
        assert!(refused.failed(), "{attempt} succeeded: {refused:?}");
    }
    let probe = env.run(&sbx, "echo x > /dev/probe").await;
    assert!(probe.stderr.contains("Read-only file system"), "{probe:?}");
    let devices = env
        .run(
            &sbx,
            "echo x > /dev/null && head -c 8 /dev/zero | wc -c && head -c 8 /dev/urandom | wc -c \
             && head -c 8 /dev/random | wc -c && (echo x > /dev/full; test $? -ne 0) && echo shm > /dev/shm/a \
             && cat /dev/shm/a",
        )
        .await;
    assert_eq!(devices.stdout, "8\n8\n8\nshm\n", "{devices:?}");
    // /dev/shm is memory: bounded, 64 MiB.
    let shm = env.run(&sbx, "head -c 100M /dev/zero > /dev/shm/big").await;
    assert!(shm.failed() && shm.stderr.contains("No space left on device"), "{shm:?}");
    env.kill(&sbx).await;
}
