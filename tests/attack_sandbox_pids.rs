//! Attacks on how the node keeps track of a sandbox's host processes (issue 24, item 2): a
//! process inside kills the sandbox's init, and the node must notice at once (the sandbox
//! reads `killed`), never answer with a host pid, and never signal a host process by a pid
//! number that may have been reused since.
// Test code: a failed expectation should fail the test right there.
#![allow(clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use agentplane_tests::sandbox::{Env, env};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn host_dir(env: &Env, sandbox: &str) -> PathBuf {
    env.node.config.state_dir.join("sandboxes").join(sandbox)
}

/// The node's record of the sandbox's outer bwrap and init: `pid@start pid@start`.
fn init_record(env: &Env, sandbox: &str) -> Vec<(u32, u64)> {
    let text = std::fs::read_to_string(host_dir(env, sandbox).join("init.id")).expect("init.id");
    text.split_whitespace()
        .map(|r| {
            let (pid, start) = r.split_once('@').expect("pid@start");
            (pid.parse().expect("pid"), start.parse().expect("start"))
        })
        .collect()
}

/// Polls the sandbox until it reads `state` (generous: a loaded host is slow, not wrong).
async fn wait_state(env: &Env, sandbox: &str, state: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..600 {
        let (status, body) = env.call(Method::GET, &format!("/sandboxes/{sandbox}"), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        if body["state"] == state {
            return body;
        }
        last = body;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{sandbox} never read {state}: {last}");
}

/// Waits until the node has removed what was the sandbox's (its directory and cgroup).
async fn wait_removed(env: &Env, sandbox: &str) {
    for _ in 0..600 {
        let cgroup_gone = ["freezer", "memory", "cpu", "pids"]
            .iter()
            .all(|c| !std::path::Path::new(&format!("/sys/fs/cgroup/{c}/agentplane/{sandbox}")).exists());
        if cgroup_gone && !host_dir(env, sandbox).exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the node never removed {sandbox}'s directory and cgroup");
}

#[tokio::test]
async fn killing_the_init_from_inside_ends_the_sandbox_at_once_without_naming_host_pids() {
    let env = env().await;
    let sbx = env.create(json!({"timeout": 300})).await;
    let record = init_record(&env, &sbx);
    let host_pids: Vec<String> = record.iter().map(|(pid, _)| pid.to_string()).collect();
    // Inside, PID 1 is bubblewrap (the kernel ignores SIGKILL sent to it from inside) and
    // PID 2 the `sleep infinity` it waits for: killing that ends PID 1, hence the namespace.
    let init = env.run(&sbx, "tr '\\0' ' ' < /proc/2/cmdline").await;
    assert_eq!(init.stdout.trim(), "sleep infinity", "{init:?}");
    let (_, _) = env.start(&sbx, json!({"cmd": "kill", "args": ["-9", "2"]})).await;

    let ended = wait_state(&env, &sbx, "killed").await;
    assert_eq!(ended["state"], "killed", "{ended}");
    wait_removed(&env, &sbx).await;
    for (pid, start) in &record {
        let same = agentplane_sandbox::local::host_process::HostProcess::open(*pid, *start);
        assert!(same.is_none_or(|p| p.has_exited()), "the sandbox's host process {pid} outlived its init");
    }

    // Nothing runs in it any more, and no answer names a host pid.
    let (status, body) =
        env.call(Method::POST, &format!("/sandboxes/{sbx}/processes"), Some(json!({"cmd": "true"}))).await;
    assert_eq!(status, StatusCode::CONFLICT, "start in a dead sandbox: {body}");
    let text = body.to_string();
    for pid in &host_pids {
        assert!(!text.contains(pid.as_str()), "the answer names host pid {pid}: {text}");
    }
    let (status, body) = env.call(Method::DELETE, &format!("/sandboxes/{sbx}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

/// The pids a node recorded are worth nothing once their processes ended: here the init dies
/// while no daemon watches, and the record is made to name a live host process (as a reused
/// pid would). The restarted node must find the sandbox ended, and neither adopting nor
/// deleting it may signal that host process.
#[tokio::test]
async fn a_recorded_pid_reused_by_a_host_process_is_never_signalled() {
    let mut env = env().await;
    let sbx = env.create(json!({"timeout": 300})).await;
    let record = init_record(&env, &sbx);
    assert_eq!(record.len(), 2, "{record:?}");
    env.node.stop().await;

    // The init dies while no daemon watches (killed through a pidfd of the test's own).
    let (init_pid, init_start) = record[1];
    let init = agentplane_sandbox::local::host_process::HostProcess::open(init_pid, init_start)
        .expect("the init runs");
    assert!(init.kill());
    for _ in 0..600 {
        if init.has_exited() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(init.has_exited(), "the init outlived SIGKILL");

    // A root host process now holds the pids the node recorded.
    let mut decoy = std::process::Command::new("sleep").arg("600").spawn().expect("decoy");
    let reused =
        record.iter().map(|(_, start)| format!("{}@{start}", decoy.id())).collect::<Vec<_>>().join(" ");
    std::fs::write(host_dir(&env, &sbx).join("init.id"), reused).expect("rewrite the record");

    env.node.restart(&env.app).await.expect("restart");
    let ended = wait_state(&env, &sbx, "killed").await;
    assert_eq!(ended["state"], "killed", "{ended}");
    wait_removed(&env, &sbx).await;
    let (status, body) = env.call(Method::DELETE, &format!("/sandboxes/{sbx}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    assert!(decoy.try_wait().expect("decoy status").is_none(), "the node killed the host process");
    let _ = decoy.kill();
    let _ = decoy.wait();
}

/// The same reused record, but the sandbox is deleted while the daemon is down: the delete
/// waits in Core's queue and the restarted node executes it against whatever it can adopt.
#[tokio::test]
async fn a_delete_applied_after_a_restart_never_signals_a_reused_pid() {
    let mut env = env().await;
    let sbx = env.create(json!({"timeout": 300})).await;
    let record = init_record(&env, &sbx);
    env.node.stop().await;
    let (init_pid, init_start) = record[1];
    let init = agentplane_sandbox::local::host_process::HostProcess::open(init_pid, init_start)
        .expect("the init runs");
    assert!(init.kill());
    for _ in 0..600 {
        if init.has_exited() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut decoy = std::process::Command::new("sleep").arg("600").spawn().expect("decoy");
    let reused =
        record.iter().map(|(_, start)| format!("{}@{start}", decoy.id())).collect::<Vec<_>>().join(" ");
    std::fs::write(host_dir(&env, &sbx).join("init.id"), reused).expect("rewrite the record");

    let (status, body) = env.call(Method::DELETE, &format!("/sandboxes/{sbx}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    env.node.restart(&env.app).await.expect("restart");
    wait_removed(&env, &sbx).await;
    assert!(decoy.try_wait().expect("decoy status").is_none(), "the node killed the host process");
    let _ = decoy.kill();
    let _ = decoy.wait();
}

/// A node that restarts while a create waits for it finds the new sandbox among those Core says
/// it hosts before it has run the create command: it must create it then, never end it as a
/// sandbox whose init is gone (seen in CI: the create answered, then every process 409 killed).
#[tokio::test]
async fn a_create_that_waits_for_a_restarting_node_is_created_not_ended() {
    let mut env = env().await;
    env.node.stop().await;
    let request = env.app.sandbox(&env.tenant.key, Method::POST, "/sandboxes").json(&json!({"timeout": 300}));
    let create = tokio::spawn(agentplane_tests::send(request));
    // Core places the sandbox on the stopped node (its create command waits in the queue).
    tokio::time::sleep(Duration::from_millis(500)).await;
    env.node.restart(&env.app).await.expect("restart");
    let (status, created) = create.await.expect("the create call").expect("request");
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let sbx = created["sandboxID"].as_str().expect("sandboxID").to_owned();
    let ran = env.run(&sbx, "echo alive").await;
    assert_eq!(ran.stdout, "alive\n", "{ran:?}");
    let (_, body) = env.call(Method::GET, &format!("/sandboxes/{sbx}"), None).await;
    assert_eq!(body["state"], "running", "{body}");
    env.kill(&sbx).await;
}
