//! The sandbox API against real processes: an embedded node daemon (the same code as
//! `agentplane-node`) runs each test's sandboxes under bubblewrap and cgroups on this host.
// The helpers below are test code too: a failed expectation should fail the test right there.
#![allow(clippy::expect_used)]

use std::time::Duration;

use agentplane_tests::sandbox::{assert_e2b, env};
use agentplane_tests::{send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

#[tokio::test]
async fn echo_to_both_streams_is_captured_with_its_witnessed_exit_code() {
    let env = env().await;
    let sandbox =
        env.create(json!({"timeout": 120, "metadata": {"who": "test"}, "envVars": {"GREETING": "hi"}})).await;
    let (id, pid) = env
        .start(
            &sandbox,
            json!({"cmd": "sh", "args": ["-c", "echo $GREETING $EXTRA; pwd; echo oops >&2; exit 3"],
                   "envs": {"EXTRA": "there"}, "cwd": "/workspace", "tag": "greeter"}),
        )
        .await;
    assert_eq!(id, "obs-1");
    assert!(pid > 1, "a pid inside the sandbox: {pid}");
    let p = env.wait_exit(&sandbox, &id).await;
    assert_eq!(p["exitCode"], 3);
    assert_eq!(p["observed"], true);
    assert_eq!(p["observationGap"], false);
    assert_eq!(p["outputTruncated"], false);
    assert_eq!(p["pty"], false);
    assert_eq!(p["tag"], "greeter");
    assert_eq!(p["pid"], pid);
    assert_eq!(p["config"]["cmd"], "sh");
    assert!(p["exitedAt"].is_string() && p["startedAt"].is_string(), "{p}");
    let (out, err, body) = env.output(&sandbox, &id).await;
    assert_eq!(String::from_utf8_lossy(&out), "hi there\n/workspace\n");
    assert_eq!(String::from_utf8_lossy(&err), "oops\n");
    assert_eq!(body["truncated"], false);
    // Listing filters: gone from live, present in exited.
    assert!(env.processes(&sandbox, "live").await.is_empty());
    assert_eq!(env.processes(&sandbox, "exited").await.len(), 1);
    env.kill(&sandbox).await;
}

#[tokio::test]
async fn a_sleeper_stays_live_and_signal_and_non_zero_exits_are_witnessed() {
    let env = env().await;
    let sandbox = env.create(json!({"timeout": 120})).await;
    let (sleeper, pid) = env.start(&sandbox, json!({"cmd": "sleep", "args": ["300"]})).await;
    let (failing, _) = env.start(&sandbox, json!({"cmd": "false"})).await;
    let (missing, _) = env.start(&sandbox, json!({"cmd": "no-such-command-here"})).await;
    assert_eq!(env.wait_exit(&sandbox, &failing).await["exitCode"], 1);
    // Not found in the sandbox: the exit code says so (env's 127), nothing is invented.
    assert_eq!(env.wait_exit(&sandbox, &missing).await["exitCode"], 127);
    let live = env.processes(&sandbox, "live").await;
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0]["processId"], sleeper);
    assert!(live[0].get("exitCode").is_none() && live[0].get("exitedAt").is_none());
    // All processes share the sandbox's PID namespace: kill the sleeper from inside.
    let (killer, _) = env.start(&sandbox, json!({"cmd": "kill", "args": ["-9", pid.to_string()]})).await;
    assert_eq!(env.wait_exit(&sandbox, &killer).await["exitCode"], 0);
    let killed = env.wait_exit(&sandbox, &sleeper).await;
    assert_eq!(killed["exitCode"], 128 + 9, "{killed}");
    // Killed from inside: the exit reads as the shell's 128+n; the node names only the signals
    // it sent itself (see the deadline test), never a guess.
    assert!(killed.get("signal").is_none_or(Value::is_null), "{killed}");
    assert_eq!(killed["observationGap"], false);
    // Newest first.
    let all: Vec<Value> =
        env.processes(&sandbox, "all").await.iter().map(|p| p["processId"].clone()).collect();
    assert_eq!(all, vec![json!("obs-4"), json!("obs-3"), json!("obs-2"), json!("obs-1")]);
    env.kill(&sandbox).await;
}

#[tokio::test]
async fn output_beyond_one_mib_keeps_the_newest_mib_and_says_it_was_truncated() {
    let env = env().await;
    let sandbox = env.create(json!({})).await;
    // 3 MB of numbered lines, so the retained part can be checked to be the end.
    let (id, _) = env.start(&sandbox, json!({"cmd": "seq", "args": ["1", "420000"]})).await;
    let p = env.wait_exit(&sandbox, &id).await;
    assert_eq!(p["exitCode"], 0);
    let p = env.wait_for(&sandbox, &id, |p| p["outputTruncated"] == true).await;
    assert_eq!(p["outputTruncated"], true);
    let (out, err, body) = env.output(&sandbox, &id).await;
    assert!(err.is_empty());
    assert_eq!(body["truncated"], true);
    assert!(out.len() <= 1024 * 1024, "{} bytes retained", out.len());
    // The newest MiB, unless the 1024-chunk cap bound first (a loaded host reads the pipe in
    // smaller pieces).
    let chunks = env.chunk_count(&sandbox, &id).await;
    assert!(out.len() > 900 * 1024 || chunks == 1024, "only {} bytes in {chunks} chunks retained", out.len());
    assert!(String::from_utf8_lossy(&out).ends_with("419999\n420000\n"));
    env.kill(&sandbox).await;
}

#[tokio::test]
async fn a_daemon_restart_leaves_an_honest_gap() {
    let mut env = env().await;
    let sandbox = env.create(json!({"timeout": 120})).await;
    let (sleeper, pid) = env.start(&sandbox, json!({"cmd": "sleep", "args": ["300"], "tag": "nap"})).await;
    let (quick, _) = env.start(&sandbox, json!({"cmd": "echo", "args": ["before"]})).await;
    env.wait_exit(&sandbox, &quick).await;
    env.node.restart(&env.app).await.expect("restart");
    // The sleeper's start was observed, but its end can no longer be: unknown, with a gap.
    let before = env.wait_for(&sandbox, &sleeper, |p| p["state"] == "unknown").await;
    assert_eq!(before["observed"], true);
    assert_eq!(before["observationGap"], true);
    assert!(before.get("exitCode").is_none() && before.get("exitedAt").is_none(), "{before}");
    // It is still running: seen again, but not observed from its start.
    let seen_id = format!("live-{pid}");
    let seen = env.wait_for(&sandbox, &seen_id, |p| p["state"] == "running").await;
    assert_eq!(seen["observed"], false);
    assert_eq!(seen["observationGap"], true);
    assert_eq!(seen["pid"], pid);
    assert!(seen.get("pty").is_none());
    assert_eq!(seen["config"]["cmd"], "sleep");
    // What ended while watched keeps its witnessed exit.
    assert_eq!(env.process(&sandbox, &quick).await["exitCode"], 0);
    let live: Vec<Value> =
        env.processes(&sandbox, "live").await.iter().map(|p| p["processId"].clone()).collect();
    assert_eq!(live, vec![json!(seen_id)]);
    // The new connection observes new processes normally.
    let (after, _) = env.start(&sandbox, json!({"cmd": "echo", "args": ["after"]})).await;
    assert_eq!(after, "obs-3");
    assert_eq!(env.wait_exit(&sandbox, &after).await["observationGap"], false);
    env.kill(&sandbox).await;
}

#[tokio::test]
async fn pause_freezes_processes_and_stops_the_clock_and_reads_never_resume() {
    let env = env().await;
    let sandbox = env.create(json!({"timeout": 60})).await;
    let (ticker, _) = env
        .start(&sandbox, json!({"cmd": "sh", "args": ["-c", "while :; do echo tick; sleep 0.05; done"]}))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, body) = env.call(Method::GET, &format!("/sandboxes/{sandbox}"), None).await;
    let end_before = body["endAt"].as_str().expect("endAt").to_owned();
    assert_eq!(
        env.call(Method::POST, &format!("/sandboxes/{sandbox}/pause"), None).await.0,
        StatusCode::NO_CONTENT
    );
    let (_, body) = env.call(Method::GET, &format!("/sandboxes/{sandbox}"), None).await;
    assert_eq!(body["state"], "paused");
    // Output written just before the freeze may still be on its way to Core: wait until it
    // stops growing (a process that was not frozen never would), then watch it stay still.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut frozen_out = env.output(&sandbox, &ticker).await.0;
    loop {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let now = env.output(&sandbox, &ticker).await.0;
        if now.len() == frozen_out.len() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "output kept growing while paused");
        frozen_out = now;
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // Reads of every kind, and the process is still frozen and the sandbox still paused.
    let (still_out, _, _) = env.output(&sandbox, &ticker).await;
    assert_eq!(frozen_out.len(), still_out.len(), "output grew while paused");
    assert_eq!(env.processes(&sandbox, "live").await.len(), 1);
    let (_, body) = env.call(Method::GET, &format!("/sandboxes/{sandbox}"), None).await;
    assert_eq!(body["state"], "paused");
    // Nothing starts and nothing extends while paused; pausing twice conflicts.
    assert_e2b(
        env.call(Method::POST, &format!("/sandboxes/{sandbox}/processes"), Some(json!({"cmd": "true"})))
            .await,
        StatusCode::CONFLICT,
    );
    assert_e2b(
        env.call(Method::POST, &format!("/sandboxes/{sandbox}/timeout"), Some(json!({"timeout": 3600})))
            .await,
        StatusCode::CONFLICT,
    );
    assert_e2b(
        env.call(Method::POST, &format!("/sandboxes/{sandbox}/pause"), None).await,
        StatusCode::CONFLICT,
    );
    let (_, body) = env.call(Method::GET, &format!("/sandboxes/{sandbox}"), None).await;
    assert_eq!(body["state"], "paused");
    let (status, resumed) = env.call(Method::POST, &format!("/sandboxes/{sandbox}/resume"), None).await;
    assert_eq!(status, StatusCode::CREATED, "{resumed}");
    assert_eq!(resumed["state"], "running");
    // The deadline moved on by the time spent paused.
    assert!(resumed["endAt"].as_str().expect("endAt") > end_before.as_str(), "{resumed} vs {end_before}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (after_out, _, _) = env.output(&sandbox, &ticker).await;
    assert!(after_out.len() > still_out.len(), "output did not resume");
    assert_e2b(
        env.call(Method::POST, &format!("/sandboxes/{sandbox}/resume"), None).await,
        StatusCode::CONFLICT,
    );
    env.kill(&sandbox).await;
}

#[tokio::test]
async fn timeout_accepts_three_values_never_shortens_and_conflicts_when_it_cannot_extend() {
    let env = env().await;
    let sandbox = env.create(json!({"timeout": 300})).await;
    let path = format!("/sandboxes/{sandbox}/timeout");
    for bad in [
        json!({}),
        json!({"timeout": 60}),
        json!({"timeout": "900"}),
        json!({"timeout": 900.5}),
        json!({"timeout": 7200}),
    ] {
        assert_e2b(env.call(Method::POST, &path, Some(bad)).await, StatusCode::BAD_REQUEST);
    }
    let (status, _) = env.call(Method::POST, &path, Some(json!({"timeout": 3600}))).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, body) = env.call(Method::GET, &format!("/sandboxes/{sandbox}"), None).await;
    let end = body["endAt"].as_str().expect("endAt").to_owned();
    // Shorter than what is left: refused, deadline unchanged.
    assert_e2b(env.call(Method::POST, &path, Some(json!({"timeout": 900}))).await, StatusCode::CONFLICT);
    assert_e2b(env.call(Method::POST, &path, Some(json!({"timeout": 1800}))).await, StatusCode::CONFLICT);
    let (_, body) = env.call(Method::GET, &format!("/sandboxes/{sandbox}"), None).await;
    assert_eq!(body["endAt"], end);
    env.kill(&sandbox).await;
    // Killed: nothing to extend.
    assert_eq!(env.call(Method::POST, &path, Some(json!({"timeout": 3600}))).await.0, StatusCode::CONFLICT);
}

#[tokio::test]
async fn at_its_deadline_a_sandbox_expires_and_its_processes_are_killed() {
    let env = env().await;
    let sandbox = env.create(json!({"timeout": 2})).await;
    let (sleeper, _) = env.start(&sandbox, json!({"cmd": "sleep", "args": ["300"]})).await;
    let ended = env.wait_exit(&sandbox, &sleeper).await;
    assert_eq!(ended["signal"], 9, "{ended}");
    let (_, body) = env.call(Method::GET, &format!("/sandboxes/{sandbox}"), None).await;
    assert_eq!(body["state"], "expired");
    assert!(env.processes(&sandbox, "live").await.is_empty());
    assert_e2b(
        env.call(Method::POST, &format!("/sandboxes/{sandbox}/timeout"), Some(json!({"timeout": 900}))).await,
        StatusCode::CONFLICT,
    );
    assert_e2b(
        env.call(Method::POST, &format!("/sandboxes/{sandbox}/processes"), Some(json!({"cmd": "true"})))
            .await,
        StatusCode::CONFLICT,
    );
    // The node cleaned up after itself.
    for _ in 0..100 {
        if !env.node.config.state_dir.join("sandboxes").join(&sandbox).exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!env.node.config.state_dir.join("sandboxes").join(&sandbox).exists());
    assert!(!std::path::Path::new(&format!("/sys/fs/cgroup/freezer/agentplane/{sandbox}")).exists());
    // Killing an ended sandbox: it is gone.
    assert_e2b(env.call(Method::DELETE, &format!("/sandboxes/{sandbox}"), None).await, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn other_projects_bad_ids_bad_bodies_and_bad_keys_are_refused_in_the_e2b_format() {
    let env = env().await;
    let sandbox = env.create(json!({})).await;
    let (id, _) = env.start(&sandbox, json!({"cmd": "true"})).await;
    let other = env.app.tenant().await.expect("tenant");
    let as_other = |method: Method, path: String| env.app.sandbox(&other.key, method, &path);
    for (method, path) in [
        (Method::GET, format!("/sandboxes/{sandbox}")),
        (Method::DELETE, format!("/sandboxes/{sandbox}")),
        (Method::POST, format!("/sandboxes/{sandbox}/pause")),
        (Method::GET, format!("/sandboxes/{sandbox}/processes")),
        (Method::GET, format!("/sandboxes/{sandbox}/processes/{id}/output")),
    ] {
        assert_e2b(send(as_other(method, path)).await.expect("send"), StatusCode::NOT_FOUND);
    }
    let (_, list) = send(as_other(Method::GET, "/sandboxes".into())).await.expect("send");
    assert_eq!(list, json!([]));
    // Bad ids.
    for path in ["/sandboxes/nope", "/sandboxes/sbx_00", &format!("/sandboxes/{}", sandbox.to_uppercase())] {
        assert_e2b(env.call(Method::GET, path, None).await, StatusCode::NOT_FOUND);
    }
    for bad in ["obs-0", "obs-99", "live-1", "proc-1"] {
        assert_e2b(
            env.call(Method::GET, &format!("/sandboxes/{sandbox}/processes/{bad}/output"), None).await,
            StatusCode::NOT_FOUND,
        );
    }
    // Bad bodies and parameters.
    let start = format!("/sandboxes/{sandbox}/processes");
    for bad in [
        json!({}),
        json!({"cmd": ""}),
        json!({"cmd": 1}),
        json!({"cmd": "ls", "args": "x"}),
        json!({"cmd": "ls", "cwd": "rel"}),
        json!({"cmd": "ls", "envs": {"1": "x"}}),
    ] {
        assert_e2b(env.call(Method::POST, &start, Some(bad)).await, StatusCode::BAD_REQUEST);
    }
    let raw = env.app.sandbox(&env.tenant.key, Method::POST, &start).body("{not json");
    assert_e2b(send(raw).await.expect("send"), StatusCode::BAD_REQUEST);
    for bad in [
        json!({"timeout": -1}),
        json!({"timeout": 86_400}),
        json!({"metadata": "x"}),
        json!({"envVars": {"A": 1}}),
    ] {
        assert_e2b(env.call(Method::POST, "/sandboxes", Some(bad)).await, StatusCode::BAD_REQUEST);
    }
    assert_e2b(env.call(Method::GET, &format!("{start}?state=dead"), None).await, StatusCode::BAD_REQUEST);
    assert_e2b(
        env.call(Method::GET, &format!("{start}?state=all&state=live"), None).await,
        StatusCode::BAD_REQUEST,
    );
    assert_e2b(
        env.call(Method::GET, &format!("{start}/{id}/output?cursor=x"), None).await,
        StatusCode::BAD_REQUEST,
    );
    assert_e2b(
        env.call(Method::GET, &format!("{start}/{id}/output?limit=0"), None).await,
        StatusCode::BAD_REQUEST,
    );
    // Keys: missing, wrong, and Bearer works as well as X-API-Key.
    assert_e2b(
        send(env.app.request(Method::GET, "/sandbox/v1/sandboxes")).await.expect("send"),
        StatusCode::UNAUTHORIZED,
    );
    assert_e2b(
        send(env.app.request(Method::GET, "/sandbox/v1/sandboxes").header("X-API-Key", "cpeer_nope"))
            .await
            .expect("send"),
        StatusCode::UNAUTHORIZED,
    );
    let (status, list) =
        send(env.app.request(Method::GET, "/sandbox/v1/sandboxes").bearer_auth(&env.tenant.key))
            .await
            .expect("send");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list[0]["sandboxID"], sandbox);
    env.kill(&sandbox).await;
}

#[tokio::test]
async fn nodes_register_once_heartbeat_host_counters_and_authenticate_by_token() {
    let env = env().await;
    let sandbox = env.create(json!({})).await;
    let (burn, _) = env
        .start(
            &sandbox,
            json!({"cmd": "sh", "args": ["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"]}),
        )
        .await;
    env.wait_exit(&sandbox, &burn).await;
    let id: agentplane_domain::ids::NodeId = env.node.node_id.parse().expect("node id");
    // Two heartbeats of one connection give a utilisation; sandbox counters ride along. Waited
    // for, not slept on: a busy machine's heartbeats come late, not never.
    let mut host = None;
    for _ in 0..300 {
        let node = env.app.store.nodes().get(&id).await.expect("node");
        if let Some(seen) = node.host
            && seen.cpu_utilization.is_some()
            && seen
                .sandboxes
                .iter()
                .any(|s| s.sandbox_id.as_str() == sandbox && s.cpu_seconds.unwrap_or(0.0) > 0.0)
        {
            host = Some(seen);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let host = host.expect("two heartbeats with the sandbox's counters within 30 s");
    assert!(host.total_memory_bytes.unwrap_or(0) > 0 && host.available_memory_bytes.unwrap_or(0) > 0);
    assert!(host.available_disk_bytes.unwrap_or(0) > 0);
    assert!(host.effective_cpu_cores.unwrap_or(0.0) > 0.0);
    let utilization = host.cpu_utilization.expect("a second heartbeat has a baseline");
    assert!((0.0..=1.0).contains(&utilization));
    let usage = host.sandboxes.iter().find(|s| s.sandbox_id.as_str() == sandbox).expect("sandbox usage");
    assert!(usage.cpu_seconds.unwrap_or(0.0) > 0.0, "{usage:?}");
    assert_eq!(usage.memory_limit_bytes, Some(1024 * 1024 * 1024));
    let all = (
        agentplane_domain::Timestamp::from_unix_millis(0),
        agentplane_domain::Timestamp::from_unix_millis(i64::MAX / 2),
    );
    assert!(env.app.store.nodes().history(&id, all.0, all.1).await.expect("history").observations.len() >= 2);
    // The sandbox says how it is isolated.
    let (_, body) = env.call(Method::GET, &format!("/sandboxes/{sandbox}"), None).await;
    assert_eq!(body["isolation"]["cgroup"], "v1");
    assert_eq!(body["isolation"]["namespaces"], "user,mount,pid,net,ipc,uts,cgroup");
    assert_eq!(body["isolation"]["writable"], "/workspace,/tmp");
    // The node API takes only node tokens; the token itself is not stored.
    let bad = send(env.app.request(Method::GET, "/node/v1/sandboxes").bearer_auth(&env.tenant.key))
        .await
        .expect("send");
    assert_eq!(bad.0, StatusCode::UNAUTHORIZED);
    let good = send(env.app.request(Method::GET, "/node/v1/sandboxes").bearer_auth(&env.node.config.token))
        .await
        .expect("send");
    assert_eq!(good.0, StatusCode::OK);
    let scan =
        env.app.store.dynamo.scan().table_name(&env.app.store.names.main_table).send().await.expect("scan");
    assert!(!format!("{:?}", scan.items()).contains(&env.node.config.token));
    // Registering needs the Core key.
    let (status, _) =
        send(env.app.request(Method::POST, "/core/v1/sandbox/nodes").bearer_auth(&env.tenant.key))
            .await
            .expect("send");
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    env.kill(&sandbox).await;
}

#[tokio::test]
async fn sandbox_objects_and_lists_are_e2b_shaped() {
    let env = env().await;
    let (status, created) =
        env.call(Method::POST, "/sandboxes", Some(json!({"timeout": 600, "metadata": {"a": "b"}}))).await;
    assert_eq!(status, StatusCode::CREATED);
    let sandbox = str_field(&created, "sandboxID").expect("id");
    assert!(sandbox.starts_with("sbx_"));
    assert_eq!(created["state"], "running");
    assert_eq!(created["metadata"], json!({"a": "b"}));
    assert!(created["startedAt"].as_str().expect("startedAt").ends_with('Z'));
    let (status, got) = env.call(Method::GET, &format!("/sandboxes/{sandbox}"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["endAt"], created["endAt"]);
    env.kill(&sandbox).await;
    let (_, got) = env.call(Method::GET, &format!("/sandboxes/{sandbox}"), None).await;
    assert_eq!(got["state"], "killed");
    assert_e2b(env.call(Method::DELETE, &format!("/sandboxes/{sandbox}"), None).await, StatusCode::NOT_FOUND);
}
