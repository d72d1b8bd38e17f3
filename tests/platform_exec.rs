//! Platform Runs executed by the `run-execution` job: a turn with the Run's model and input
//! whose tools act on the environment's workspace sandbox (a real sandbox on the embedded node
//! daemon), checkpoints before and after (the node uploads only the blobs the workspaces
//! bucket lacks through presigned PUTs), the file diff from the two, stop (a running command
//! killed), `platform_runtime_unavailable` while no node can host the workspace; rollback
//! through the `rollbacks` queue and the `rollback-restore` job.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentplane_domain::platform::run::ExecuteRun;
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, TestNode, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn put_file(app: &TestApp, key: &str, env: &str, path: &str, bytes: &[u8]) -> R {
    let (status, body) = send(
        app.v1(key, Method::PUT, &format!("/environments/{env}/files?path={path}")).body(bytes.to_vec()),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::OK, "{body}");
    Ok(())
}

async fn get_file(app: &TestApp, key: &str, env: &str, path: &str) -> anyhow::Result<(StatusCode, Vec<u8>)> {
    let response = app.v1(key, Method::GET, &format!("/environments/{env}/files?path={path}")).send().await?;
    Ok((response.status(), response.bytes().await?.to_vec()))
}

fn run_path(env: &str, session: &str, run: &str) -> String {
    format!("/environments/{env}/sessions/{session}/runs/{run}")
}

/// Polls the Run until `done` holds (at most `within`).
async fn wait_run(
    app: &TestApp,
    key: &str,
    path: &str,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let started = Instant::now();
    loop {
        let (status, body) = send(app.v1(key, Method::GET, path)).await?;
        anyhow::ensure!(status == StatusCode::OK, "{body}");
        if done(&body["data"]) {
            return Ok(body);
        }
        anyhow::ensure!(started.elapsed() < within, "the Run never got there: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn terminal(run: &Value) -> bool {
    matches!(run["status"].as_str(), Some("completed" | "failed" | "stopped"))
}

/// Validates answers against the spec's schemas (`tests/spec/`, no extra field).
fn check_shapes(answers: &[(&str, &Value)]) -> R {
    let python = std::env::var("AGENTPLANE_TOOLS_PYTHON").map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.localstack/tools/bin/python")
    });
    let schema = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("spec/runs-stop-rollback.schema.json");
    let script = r#"
import json, sys, jsonschema_rs
doc = json.load(open(sys.argv[1]))
bad = 0
for name, body in json.load(sys.stdin):
    for error in jsonschema_rs.validator_for(doc[name], validate_formats=True).iter_errors(body):
        bad += 1
        print(f"{name}: {error.message} at {list(error.instance_path)} in {json.dumps(body)[:400]}")
sys.exit(1 if bad else 0)
"#;
    let mut child = std::process::Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(&schema)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
        stdin.write_all(serde_json::to_string(answers)?.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "answers that break the spec's schemas:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// The tool results the model was sent, by call id.
fn tool_result(model: &ScriptedModel, call: &str) -> Option<Value> {
    model.requests().iter().rev().find_map(|r| {
        r["messages"].as_array()?.iter().find_map(|m| {
            (m["role"] == "tool" && m["tool_call_id"] == call).then(|| {
                serde_json::from_str(m["content"].as_str().unwrap_or("null")).unwrap_or(m["content"].clone())
            })
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_works_on_the_workspace_with_its_tools_and_records_its_diff_and_checkpoint() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    put_file(&app, &tenant.key, &env, "/workspace/seed.txt", b"seed\n").await?;
    put_file(&app, &tenant.key, &env, "/workspace/old.txt", b"old\n").await?;
    put_file(&app, &tenant.key, &env, "/workspace/keep.txt", b"keep\n").await?;

    model.push(Reply::tool(
        "c1",
        "write_file",
        &json!({"path": "/workspace/src/new.txt", "content": "hello"}),
    ));
    model.push(Reply::tool(
        "c2",
        "run_command",
        &json!({"command": "cat seed.txt src/new.txt; echo oops >&2; echo more >> seed.txt; exit 3"}),
    ));
    model.push(Reply::tool("c3", "delete_file", &json!({"path": "old.txt"})));
    model.push(Reply::tool("c4", "read_file", &json!({"path": "/workspace/seed.txt"})));
    model.push(Reply::tool("c5", "list_files", &json!({})));
    model.push(Reply::tool("c6", "read_file", &json!({"path": "/etc/passwd"})));
    model.push(Reply::text("All done."));
    let (status, created) = send(
        app.v1(&tenant.key, Method::POST, &format!("/environments/{env}/sessions/{session}/runs"))
            .json(&json!({"model": "gpt-platform", "input": "Edit the workspace", "files": [{"path": "/workspace/seed.txt"}]})),
    )
    .await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{created}");
    let run = created["data"]["id"].as_str().unwrap_or_default().to_owned();
    let path = run_path(&env, &session, &run);
    let done = wait_run(&app, &tenant.key, &path, Duration::from_secs(60), terminal).await?;
    let data = &done["data"];
    assert_eq!(data["status"], "completed", "{done}");
    assert_eq!(data["output"], "All done.");
    assert_eq!(data["fileDiffStatus"], "ready");
    assert_eq!(data["checkpoint"]["status"], "ready");
    assert!(data["checkpoint"]["snapshotId"].as_str().is_some_and(|s| s.len() == 64), "{done}");
    let sha = |b: &[u8]| {
        use sha2::Digest;
        sha2::Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect::<String>()
    };
    assert_eq!(
        data["fileDiff"],
        json!([
            {"path": "/workspace/old.txt", "kind": "deleted", "beforeSha256": sha(b"old\n")},
            {"path": "/workspace/seed.txt", "kind": "modified", "beforeSha256": sha(b"seed\n"), "afterSha256": sha(b"seed\nmore\n")},
            {"path": "/workspace/src/new.txt", "kind": "added", "afterSha256": sha(b"hello")},
        ]),
        "{done}"
    );
    // BYOK usage: no rated calls, amounts "0", the sandbox time measured.
    assert_eq!(data["usage"]["calls"], json!([]));
    assert_eq!(data["usage"]["totalAmountUsd"], "0");
    assert!(data["usage"]["sandboxRuntimeSeconds"].as_f64().is_some_and(|s| s > 0.0), "{done}");
    assert!(data["startedAt"].is_string() && data["finishedAt"].is_string());

    // The model was the Run's, reached over HTTP, offered the five tools; it saw each result.
    let requests = model.requests();
    assert_eq!(requests.len(), 7);
    assert_eq!(requests[0]["model"], "gpt-platform");
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for tool in ["read_file", "write_file", "list_files", "delete_file", "run_command"] {
        assert!(offered.contains(&tool), "{offered:?}");
    }
    let command = tool_result(&model, "c2").unwrap_or_default();
    assert_eq!(command["exitCode"], 3, "{command}");
    assert_eq!(command["stdout"], "seed\nhello");
    assert_eq!(command["stderr"], "oops\n");
    assert_eq!(tool_result(&model, "c4").unwrap_or_default()["content"], "seed\nmore\n");
    let listed = tool_result(&model, "c5").unwrap_or_default();
    let paths: Vec<&str> =
        listed["files"].as_array().into_iter().flatten().filter_map(|f| f["path"].as_str()).collect();
    assert_eq!(paths, ["/workspace/keep.txt", "/workspace/seed.txt", "/workspace/src/new.txt"]);
    let refused = model.requests()[6]["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["tool_call_id"] == "c6").cloned())
        .unwrap_or_default();
    assert!(refused["content"].as_str().is_some_and(|c| c.starts_with("error:")), "{refused}");

    // The workspace holds what the agent made.
    assert_eq!(
        get_file(&app, &tenant.key, &env, "/workspace/src/new.txt").await?,
        (StatusCode::OK, b"hello".to_vec())
    );
    assert_eq!(get_file(&app, &tenant.key, &env, "/workspace/old.txt").await?.0, StatusCode::NOT_FOUND);

    // The same message again does nothing (the Run is no longer queued).
    let project = tenant.project_id.parse()?;
    let message = ExecuteRun { project_id: project, run_id: run.parse()? };
    let again = agentplane_engine::platform::execute::execute(
        &agentplane_api::platform::platform(&app.app),
        &message,
    )
    .await?;
    assert_eq!(again, agentplane_engine::platform::execute::Executed::Stale);
    let (_, after) = send(app.v1(&tenant.key, Method::GET, &path)).await?;
    assert_eq!(after["data"], done["data"]);
    assert_eq!(model.requests().len(), 7);

    // The environment's initial checkpoint is the first Run's start.
    let environment = app.store.environments().get(&project, &env.parse()?).await?;
    assert!(environment.initial_checkpoint.is_some());
    let (_, listed) =
        send(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}/sessions/{session}/runs")))
            .await?;
    let item = json!({"data": listed["data"][0]});
    assert_eq!(listed["data"].as_array().map(Vec::len), Some(1));
    check_shapes(&[("runAction", &created), ("getRun", &done), ("getRun", &item)])?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_naming_a_missing_or_changed_file_fails_before_any_model_call() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    put_file(&app, &tenant.key, &env, "/workspace/a.txt", b"a").await?;
    for files in [
        json!([{"path": "/workspace/missing.txt"}]),
        json!([{"path": "/workspace/a.txt", "sha256": "0".repeat(64)}]),
    ] {
        let (status, created) = send(
            app.v1(&tenant.key, Method::POST, &format!("/environments/{env}/sessions/{session}/runs"))
                .json(&json!({"model": "m", "input": "x", "files": files})),
        )
        .await?;
        assert_eq!(status, StatusCode::ACCEPTED, "{created}");
        let path = run_path(&env, &session, created["data"]["id"].as_str().unwrap_or_default());
        let done = wait_run(&app, &tenant.key, &path, Duration::from_secs(30), terminal).await?;
        assert_eq!(done["data"]["status"], "failed", "{done}");
        let (status, state) = send(app.v1(&tenant.key, Method::POST, &format!("{path}/stop"))).await?;
        assert_eq!(status, StatusCode::ACCEPTED);
        assert_eq!(state["data"]["error"]["code"], "run_file_invalid", "{state}");
        assert_eq!(state["data"]["fileDiff"], json!([]));
        check_shapes(&[("getRun", &done), ("runAction", &state)])?;
    }
    assert!(model.requests().is_empty(), "the model was called");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stop_kills_the_running_command_and_the_run_ends_stopped_without_another_model_call() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    model.push(Reply::tool(
        "c1",
        "run_command",
        &json!({"command": "echo started > marker; sleep 60; echo late > late"}),
    ));
    model.push(Reply::text("should never be asked"));
    let (_, created) = send(
        app.v1(&tenant.key, Method::POST, &format!("/environments/{env}/sessions/{session}/runs"))
            .json(&json!({"model": "m", "input": "sleep"})),
    )
    .await?;
    let path = run_path(&env, &session, created["data"]["id"].as_str().unwrap_or_default());
    // Wait until the command runs.
    let started = Instant::now();
    while get_file(&app, &tenant.key, &env, "/workspace/marker").await?.0 != StatusCode::OK {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "the command never started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The command runs as an observed process of the environment's one sandbox.
    let (status, list) = send(app.sandbox(&tenant.key, Method::GET, "/sandboxes")).await?;
    assert_eq!(status, StatusCode::OK, "{list}");
    // (Two first uses at once may each start one; the loser's is killed.)
    let running: Vec<&Value> =
        list.as_array().into_iter().flatten().filter(|s| s["state"] == "running").collect();
    assert_eq!(running.len(), 1, "{list}");
    let sandbox = running[0]["sandboxID"].as_str().unwrap_or_default().to_owned();
    assert!(sandbox.starts_with("sbx_"), "{list}");
    let processes = format!("/sandboxes/{sandbox}/processes");
    let (status, live) =
        send(app.sandbox(&tenant.key, Method::GET, &format!("{processes}?state=live"))).await?;
    assert_eq!(status, StatusCode::OK, "{live}");
    let shell = live["processes"].as_array().and_then(|ps| ps.iter().find(|p| p["tag"] == "run_command"));
    let pid = shell.map(|p| p["processId"].clone()).unwrap_or_default();
    assert!(pid.as_str().is_some_and(|id| id.starts_with("obs-")), "the command's shell runs: {live}");
    let stop_at = Instant::now();
    let (status, stopped) = send(app.v1(&tenant.key, Method::POST, &format!("{path}/stop"))).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{stopped}");
    assert_eq!(stopped["data"]["stopRequested"], true);
    let done = wait_run(&app, &tenant.key, &path, Duration::from_secs(20), terminal).await?;
    assert_eq!(done["data"]["status"], "stopped", "{done}");
    assert!(stop_at.elapsed() < Duration::from_secs(15), "the stop took {:?}", stop_at.elapsed());
    assert_eq!(model.requests().len(), 1, "a model call after the stop");
    // The command was killed (its `sleep 60` with it): no process of it is live, and its
    // observation says it ended without a clean exit.
    let started = Instant::now();
    loop {
        let (status, live) =
            send(app.sandbox(&tenant.key, Method::GET, &format!("{processes}?state=live"))).await?;
        assert_eq!(status, StatusCode::OK, "{live}");
        let still = live["processes"].as_array().map_or(usize::MAX, Vec::len);
        if still == 0 {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(10), "still running: {live}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, all) =
        send(app.sandbox(&tenant.key, Method::GET, &format!("{processes}?state=all"))).await?;
    assert_eq!(status, StatusCode::OK, "{all}");
    let shell = all["processes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["processId"] == pid))
        .cloned()
        .unwrap_or_default();
    assert_ne!(shell["state"], "running", "{all}");
    assert_ne!(shell["exitCode"], json!(0), "a killed command does not exit 0: {all}");
    assert_eq!(done["data"]["checkpoint"]["status"], "ready");
    assert_eq!(done["data"]["fileDiff"][0]["path"], "/workspace/marker");
    // Stopping again changes nothing.
    let (status, again) = send(app.v1(&tenant.key, Method::POST, &format!("{path}/stop"))).await?;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(again["data"]["status"], "stopped");
    check_shapes(&[("runAction", &stopped), ("getRun", &done)])?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stop_racing_completion_leaves_one_terminal_state() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    for offset in [0u64, 150, 300, 600, 1200] {
        let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
        model.push(Reply::text("quick"));
        let (_, created) = send(
            app.v1(&tenant.key, Method::POST, &format!("/environments/{env}/sessions/{session}/runs"))
                .json(&json!({"model": "m", "input": "go"})),
        )
        .await?;
        let path = run_path(&env, &session, created["data"]["id"].as_str().unwrap_or_default());
        tokio::time::sleep(Duration::from_millis(offset)).await;
        let (status, _) = send(app.v1(&tenant.key, Method::POST, &format!("{path}/stop"))).await?;
        assert_eq!(status, StatusCode::ACCEPTED);
        let done = wait_run(&app, &tenant.key, &path, Duration::from_secs(30), terminal).await?;
        let first = done["data"]["status"].clone();
        assert!(first == "completed" || first == "stopped", "{done}");
        app.drained().await?;
        let (_, later) = send(app.v1(&tenant.key, Method::GET, &path)).await?;
        assert_eq!(later["data"]["status"], first, "offset {offset}: the terminal state changed");
        assert_eq!(later["data"]["finishedAt"], done["data"]["finishedAt"]);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_a_node_the_run_reports_runtime_unavailable_then_runs_once_one_comes() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    model.push(Reply::text("ran"));
    let (_, created) = send(
        app.v1(&tenant.key, Method::POST, &format!("/environments/{env}/sessions/{session}/runs"))
            .json(&json!({"model": "m", "input": "go"})),
    )
    .await?;
    let path = run_path(&env, &session, created["data"]["id"].as_str().unwrap_or_default());
    wait_run(&app, &tenant.key, &path, Duration::from_secs(30), |r| r["status"] == "running").await?;
    // The GET shape has no `error`; the stored Run (and the stop shape) carry the diagnostic.
    let project = tenant.project_id.parse()?;
    let run_id = created["data"]["id"].as_str().unwrap_or_default().parse()?;
    let started = Instant::now();
    loop {
        let stored = app.store.runs().get(&project, &run_id).await?;
        if stored.error.as_ref().is_some_and(|e| e.code == "platform_runtime_unavailable") {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "no diagnostic: {stored:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(model.requests().is_empty());
    // A second Run of another session waits behind it (one Run at a time per environment),
    // queued, and is stopped meanwhile: `stopped` at once, no model call, nothing checkpointed.
    let waiting_session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    let (_, waiting) = send(
        app.v1(&tenant.key, Method::POST, &format!("/environments/{env}/sessions/{waiting_session}/runs"))
            .json(&json!({"model": "m", "input": "never"})),
    )
    .await?;
    let waiting = run_path(&env, &waiting_session, waiting["data"]["id"].as_str().unwrap_or_default());
    let (_, queued) = send(app.v1(&tenant.key, Method::GET, &waiting)).await?;
    assert_eq!(queued["data"]["status"], "queued", "{queued}");
    let (status, _) =
        send(app.v1(&tenant.key, Method::POST, &format!("{waiting}/stop")).json(&json!({}))).await?;
    assert_eq!(status, StatusCode::ACCEPTED);
    let stopped = wait_run(&app, &tenant.key, &waiting, Duration::from_secs(30), terminal).await?;
    assert_eq!(stopped["data"]["status"], "stopped", "{stopped}");
    assert_eq!(stopped["data"]["checkpoint"]["status"], "skipped", "{stopped}");
    assert!(model.requests().is_empty());
    // A node comes: the same Run runs (the message comes back), the diagnostic cleared.
    let _node = TestNode::start(&app).await?;
    let done = wait_run(&app, &tenant.key, &path, Duration::from_secs(60), terminal).await?;
    assert_eq!(done["data"]["status"], "completed", "{done}");
    assert_eq!(done["data"]["output"], "ran");
    assert_eq!(app.store.runs().get(&project, &run_id).await?.error, None);
    assert_eq!(model.requests().len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_checkpoint_of_1000_files_with_one_changed_uploads_one_blob_and_one_manifest() -> R {
    let app = TestApp::spawn().await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    put_file(&app, &tenant.key, &env, "/workspace/first.txt", b"first").await?;
    let project = tenant.project_id.parse()?;
    let environment = app.store.environments().get(&project, &env.parse()?).await?;
    let sandbox = agentplane_engine::platform::workspace::sandbox(
        &agentplane_api::platform::platform(&app.app),
        &environment,
    )
    .await?;
    // 1,000 files (distinct contents) made inside the sandbox.
    let number = app.store.sandboxes().next_process_number(&sandbox.id, agentplane_api::edge::now()).await?;
    let command = agentplane_domain::sandbox::command::Command::StartProcess {
        sandbox_id: sandbox.id.clone(),
        number,
        config: agentplane_domain::sandbox::ProcessConfig {
            cmd: "bash".into(),
            args: vec![
                "-c".into(),
                "mkdir -p d && for i in $(seq 1 999); do echo file-$i > d/f$i; done".into(),
            ],
            envs: Default::default(),
            cwd: Some("/workspace".into()),
        },
        tag: None,
    };
    agentplane_engine::dispatch::run(&app.app.store, &sandbox.node_id, command).await?;
    let started = Instant::now();
    loop {
        let (_, list) = send(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}/files"))).await?;
        if list["data"].as_array().is_some_and(|l| l.len() == 1000) {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "the files were never made");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let bucket = app.store.workspaces()?;
    let first = agentplane_engine::platform::checkpoint::take(&app.app.store, &sandbox, None).await?;
    assert_eq!(first.manifest.files.len(), 1000);
    assert_eq!(first.uploaded, 1000);
    assert!(first.manifest_written);
    let (blobs, manifests) = (bucket.keys("blobs/").await?.len(), bucket.keys("manifests/").await?.len());
    assert_eq!((blobs, manifests), (1000, 1));
    // Nothing changed: nothing uploaded, the same manifest.
    let same = agentplane_engine::platform::checkpoint::take(&app.app.store, &sandbox, None).await?;
    assert_eq!((same.uploaded, same.manifest_written, same.id.as_str()), (0, false, first.id.as_str()));
    // One file changed: exactly one blob and one manifest.
    put_file(&app, &tenant.key, &env, "/workspace/d/f500", b"changed").await?;
    let changed =
        agentplane_engine::platform::checkpoint::take(&app.app.store, &sandbox, Some(&first.manifest))
            .await?;
    assert_eq!((changed.uploaded, changed.bytes, changed.manifest_written), (1, 7, true));
    assert_eq!(bucket.keys("blobs/").await?.len(), 1001);
    assert_eq!(bucket.keys("manifests/").await?.len(), 2);
    assert!(bucket.keys("scratch/").await?.is_empty(), "scratch objects left behind");
    let diff = agentplane_domain::platform::manifest::diff(&first.manifest, &changed.manifest);
    assert_eq!(diff.len(), 1);
    assert_eq!(diff[0].path, "/workspace/d/f500");
    // A restore goes back to the first checkpoint.
    put_file(&app, &tenant.key, &env, "/workspace/extra.txt", b"extra").await?;
    let restored =
        agentplane_engine::platform::checkpoint::restore(&app.app.store, &sandbox, &first.id).await?;
    assert_eq!(restored.get("removed").map(String::as_str), Some("1"));
    assert_eq!(restored.get("fetched").map(String::as_str), Some("1"));
    assert_eq!(get_file(&app, &tenant.key, &env, "/workspace/d/f500").await?.1, b"file-500\n".to_vec());
    assert_eq!(get_file(&app, &tenant.key, &env, "/workspace/extra.txt").await?.0, StatusCode::NOT_FOUND);
    let back = agentplane_engine::platform::checkpoint::take(&app.app.store, &sandbox, Some(&first.manifest))
        .await?;
    assert_eq!(back.id, first.id);
    Ok(())
}

/// Creates a Run and waits for it to end; its id.
async fn run_to_end(
    app: &TestApp,
    key: &str,
    env: &str,
    session: &str,
    input: &str,
) -> anyhow::Result<(String, Value)> {
    let (status, created) = send(
        app.v1(key, Method::POST, &format!("/environments/{env}/sessions/{session}/runs"))
            .json(&json!({"model": "m", "input": input})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::ACCEPTED, "{created}");
    let id = created["data"]["id"].as_str().unwrap_or_default().to_owned();
    let done = wait_run(app, key, &run_path(env, session, &id), Duration::from_secs(60), terminal).await?;
    Ok((id, done))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rolling_back_a_session_a_run_reverts_the_later_session_b_run_but_not_one_created_after() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let a = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    let b = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    put_file(&app, &tenant.key, &env, "/workspace/seed.txt", b"seed").await?;

    model.push(Reply::tool("a1", "write_file", &json!({"path": "a.txt", "content": "from A"})));
    model.push(Reply::tool("a2", "write_file", &json!({"path": "seed.txt", "content": "changed by A"})));
    model.push(Reply::text("A done"));
    let (run_a, done_a) = run_to_end(&app, &tenant.key, &env, &a, "A's task").await?;
    assert_eq!(done_a["data"]["status"], "completed", "{done_a}");
    model.push(Reply::tool("b1", "write_file", &json!({"path": "b.txt", "content": "from B"})));
    model.push(Reply::text("B done"));
    let (run_b, done_b) = run_to_end(&app, &tenant.key, &env, &b, "B's task").await?;
    assert_eq!(done_b["data"]["status"], "completed", "{done_b}");

    // Roll back A's Run: B's later Run goes too (environment order, not session order).
    let path_a = run_path(&env, &a, &run_a);
    let (status, accepted) = send(app.v1(&tenant.key, Method::DELETE, &path_a)).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert_eq!(accepted["data"]["status"], "reverting");
    // A Run created after the rollback was accepted waits, then runs on the restored workspace.
    model.push(Reply::tool("c1", "list_files", &json!({})));
    model.push(Reply::text("C done"));
    let (status, created_c) = send(
        app.v1(&tenant.key, Method::POST, &format!("/environments/{env}/sessions/{b}/runs"))
            .json(&json!({"model": "m", "input": "C's task"})),
    )
    .await?;
    assert_eq!(status, StatusCode::ACCEPTED);
    let run_c = created_c["data"]["id"].as_str().unwrap_or_default().to_owned();

    let reverted_a =
        wait_run(&app, &tenant.key, &path_a, Duration::from_secs(60), |r| r["status"] == "reverted").await?;
    let path_b = run_path(&env, &b, &run_b);
    let (_, reverted_b) = send(app.v1(&tenant.key, Method::GET, &path_b)).await?;
    assert_eq!(reverted_b["data"]["status"], "reverted", "{reverted_b}");
    // Usage and audit are kept: the diff and checkpoint stay as they were.
    assert_eq!(reverted_a["data"]["fileDiff"], done_a["data"]["fileDiff"]);
    assert_eq!(reverted_a["data"]["checkpoint"]["status"], "ready");
    assert_eq!(reverted_a["data"]["output"], "A done");

    let project = tenant.project_id.parse()?;
    // Session B's transcript is as before B's Run (it had none).
    assert_eq!(app.store.transcripts().load(&project, &b.parse()?).await?, None);
    let path_c = run_path(&env, &b, &run_c);
    let done_c = wait_run(&app, &tenant.key, &path_c, Duration::from_secs(60), terminal).await?;
    assert_eq!(done_c["data"]["status"], "completed", "{done_c}");
    // C saw the workspace as it was before A's Run.
    let listed = tool_result(&model, "c1").unwrap_or_default();
    let paths: Vec<&str> =
        listed["files"].as_array().into_iter().flatten().filter_map(|f| f["path"].as_str()).collect();
    assert_eq!(paths, ["/workspace/seed.txt"], "{listed}");
    assert_eq!(get_file(&app, &tenant.key, &env, "/workspace/seed.txt").await?.1, b"seed".to_vec());
    assert_eq!(get_file(&app, &tenant.key, &env, "/workspace/a.txt").await?.0, StatusCode::NOT_FOUND);
    // Session B's transcript was restored to before B's Run: C's request holds only C's task.
    let last = model.requests().last().cloned().unwrap_or_default();
    let users: Vec<&str> = last["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(users, ["C's task"], "{last}");
    // Session A's transcript is as before its Run (it had none).
    assert_eq!(app.store.transcripts().load(&project, &a.parse()?).await?, None);

    // Retrying DELETE of the reverted Run changes nothing (C is not discarded).
    let (status, again) = send(app.v1(&tenant.key, Method::DELETE, &path_a)).await?;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(again["data"]["status"], "reverted");
    app.drained().await?;
    let (_, still_c) = send(app.v1(&tenant.key, Method::GET, &path_c)).await?;
    assert_eq!(still_c["data"]["status"], "completed");
    // The same rollback message again restores nothing.
    let message = agentplane_domain::platform::run::RollbackMessage {
        project_id: project,
        environment_id: env.parse()?,
        run_id: run_a.parse()?,
    };
    put_file(&app, &tenant.key, &env, "/workspace/after.txt", b"after").await?;
    let twice = agentplane_engine::platform::rollback::restore(
        &agentplane_api::platform::platform(&app.app),
        &message,
    )
    .await?;
    assert_eq!(twice, agentplane_engine::platform::rollback::Restored::Stale);
    assert_eq!(get_file(&app, &tenant.key, &env, "/workspace/after.txt").await?.1, b"after".to_vec());
    check_shapes(&[("runAction", &accepted), ("runAction", &again), ("getRun", &reverted_a)])?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queued_run_is_stopped_or_rolled_back_without_running() -> R {
    let app = TestApp::spawn_without_runs_consumer().await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    let runs = format!("/environments/{env}/sessions/{session}/runs");
    let mut answers = Vec::new();
    // Stopped while queued, then rolled back: reverted.
    let (_, first) =
        send(app.v1(&tenant.key, Method::POST, &runs).json(&json!({"model": "m", "input": "x"}))).await?;
    let first_path = run_path(&env, &session, first["data"]["id"].as_str().unwrap_or_default());
    let (_, stopped) = send(app.v1(&tenant.key, Method::POST, &format!("{first_path}/stop"))).await?;
    assert_eq!(stopped["data"]["status"], "stopped");
    let (status, accepted) = send(app.v1(&tenant.key, Method::DELETE, &first_path)).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert_eq!(accepted["data"]["status"], "reverting");
    answers.push(accepted);
    let done =
        wait_run(&app, &tenant.key, &first_path, Duration::from_secs(30), |r| r["status"] == "reverted")
            .await?;
    assert_eq!(done["data"]["checkpoint"]["status"], "skipped");
    // A queued Run rolled back: reverted, it never runs (its message finds it reverted).
    let (_, queued) =
        send(app.v1(&tenant.key, Method::POST, &runs).json(&json!({"model": "m", "input": "y"}))).await?;
    let queued_id = queued["data"]["id"].as_str().unwrap_or_default().to_owned();
    let queued_path = run_path(&env, &session, &queued_id);
    let (status, accepted) = send(app.v1(&tenant.key, Method::DELETE, &queued_path)).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    answers.push(accepted);
    let done =
        wait_run(&app, &tenant.key, &queued_path, Duration::from_secs(30), |r| r["status"] == "reverted")
            .await?;
    assert_eq!(done["data"]["checkpoint"]["status"], "skipped", "{done}");
    let message = ExecuteRun { project_id: tenant.project_id.parse()?, run_id: queued_id.parse()? };
    let executed = agentplane_engine::platform::execute::execute(
        &agentplane_api::platform::platform(&app.app),
        &message,
    )
    .await?;
    assert_eq!(executed, agentplane_engine::platform::execute::Executed::Stale);
    // A reverted Run cannot be stopped.
    let (status, body) = send(app.v1(&tenant.key, Method::POST, &format!("{queued_path}/stop"))).await?;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("run_reverted")));
    // Another project's Run: 404, nothing changes.
    let stranger = app.tenant().await?;
    let (status, body) = send(app.v1(&stranger.key, Method::DELETE, &queued_path)).await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let refs: Vec<(&str, &Value)> = answers.iter().map(|a| ("runAction", a)).collect();
    check_shapes(&refs)?;
    check_shapes(&[("error", &body)])?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_earlier_run_still_running_refuses_the_rollback_and_reverts_nothing() -> R {
    let limits =
        agentplane_api::app::PlatformLimits { file_wait: Duration::from_secs(1), ..Default::default() };
    let app = TestApp::spawn_without_runs_consumer_and(|app| app.with_platform_limits(limits)).await?;
    let tenant = app.tenant().await?;
    let project = tenant.project_id.parse()?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    let runs = format!("/environments/{env}/sessions/{session}/runs");
    let mut ids = Vec::new();
    for input in ["one", "two"] {
        let (_, created) =
            send(app.v1(&tenant.key, Method::POST, &runs).json(&json!({"model": "m", "input": input})))
                .await?;
        ids.push(created["data"]["id"].as_str().unwrap_or_default().to_owned());
    }
    // The first Run still runs (its end checkpoint pending): the state before the second is not
    // known yet. (Pending or failed checkpoints of Runs that ended are skipped instead: the
    // domain's `restore_point` tests and tests/platform_order.rs.)
    let mut first = app.store.runs().get(&project, &ids[0].parse()?).await?;
    let expected = first.version;
    first.status = agentplane_domain::platform::run::RunStatus::Running;
    first.version = expected + 1;
    app.store.runs().replace(&first, expected).await?;
    let second_path = run_path(&env, &session, &ids[1]);
    let (status, refused) = send(app.v1(&tenant.key, Method::DELETE, &second_path)).await?;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "checkpoint_unavailable");
    assert_eq!(refused["error"]["details"]["runId"], ids[0].as_str());
    check_shapes(&[("error", &refused)])?;
    for id in &ids {
        let stored = app.store.runs().get(&project, &id.parse()?).await?;
        assert!(!stored.status.is_reverted(), "{stored:?}");
    }
    let environment = app.store.environments().get(&project, &env.parse()?).await?;
    assert_eq!(environment.rollback, None);
    // It ends, its end checkpoint failed.
    let expected = first.version;
    first.status = agentplane_domain::platform::run::RunStatus::Completed;
    first.checkpoint.status = agentplane_domain::platform::run::CheckpointStatus::Failed;
    first.version = expected + 1;
    app.store.runs().replace(&first, expected).await?;

    // While a rollback holds the environment, workspace writes answer 409 and a second one too.
    let (status, accepted) =
        send(app.v1(&tenant.key, Method::DELETE, &run_path(&env, &session, &ids[0]))).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let active = agentplane_domain::platform::ActiveRollback {
        run_id: ids[0].parse()?,
        from_sequence: 99,
        through_sequence: 2,
        manifest: None,
        accepted_at: agentplane_api::edge::now(),
    };
    // (Hold the environment as a rollback would, whether or not the first one has ended.)
    let started = Instant::now();
    while app.store.environments().get(&project, &env.parse()?).await?.rollback.is_some() {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "the rollback never ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.store.environments().begin_rollback(&project, &env.parse()?, &active).await?;
    let (status, body) = send(
        app.v1(&tenant.key, Method::PUT, &format!("/environments/{env}/files?path=/workspace/x")).body("x"),
    )
    .await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("rollback_in_progress"))
    );
    let (status, body) =
        send(app.v1(&tenant.key, Method::DELETE, &format!("/environments/{env}/files?path=/workspace/x")))
            .await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("rollback_in_progress"))
    );
    // A file operation waits for the rollback (up to its bound) rather than answer at once:
    // the rollback ends while this write waits, and the write goes on past it.
    let waited = Instant::now();
    let ending = {
        let store = app.store.clone();
        let env: agentplane_domain::telemetry::EnvironmentId = env.parse()?;
        let run_id = active.run_id;
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            store.environments().end_rollback(&project, &env, &run_id).await
        })
    };
    let (status, body) = send(
        app.v1(&tenant.key, Method::PUT, &format!("/environments/{env}/files?path=/workspace/x")).body("x"),
    )
    .await?;
    ending.await??;
    // (This test runs no node: past the rollback, the write finds no sandbox to write to.)
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("platform_runtime_unavailable")),
        "{body}"
    );
    assert!(waited.elapsed() >= Duration::from_millis(400), "the write did not wait for the rollback");
    app.store.environments().begin_rollback(&project, &env.parse()?, &active).await?;
    let (_, third) =
        send(app.v1(&tenant.key, Method::POST, &runs).json(&json!({"model": "m", "input": "3"}))).await?;
    let (status, body) = send(app.v1(
        &tenant.key,
        Method::DELETE,
        &run_path(&env, &session, third["data"]["id"].as_str().unwrap_or_default()),
    ))
    .await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("rollback_in_progress")),
        "{body}"
    );
    check_shapes(&[("error", &body)])?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn run_events_reach_a_subscribed_endpoint() -> R {
    use std::sync::{Arc, Mutex};
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let sink = got.clone();
    let router = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let sink = sink.clone();
            async move {
                if let Ok(mut all) = sink.lock() {
                    all.push(body);
                }
                StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });

    let model = ScriptedModel::start().await?;
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| anyhow::anyhow!("{e}"))?;
    let seal =
        agentplane_engine::webhooks::SealKey::from_bytes(&key).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let webhooks = agentplane_engine::webhooks::WebhookConfig::new(
        Some(Arc::new(seal)),
        agentplane_tests::loopback_receivers(),
    );
    let app = TestApp::spawn_with_model_and(&model, |app| app.with_webhooks(webhooks)).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let types = json!(["run.completed", "run.failed", "run.stopped", "run.reverted"]);
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/webhooks").json(&json!({"url": url, "eventTypes": types})),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    model.push(Reply::text("done"));
    let (run, done) = run_to_end(&app, &tenant.key, &env, &session, "go").await?;
    assert_eq!(done["data"]["status"], "completed");
    let (_, failing) = send(
        app.v1(&tenant.key, Method::POST, &format!("/environments/{env}/sessions/{session}/runs"))
            .json(&json!({"model": "m", "input": "x", "files": [{"path": "/workspace/none"}]})),
    )
    .await?;
    let failing = failing["data"]["id"].as_str().unwrap_or_default().to_owned();
    wait_run(&app, &tenant.key, &run_path(&env, &session, &failing), Duration::from_secs(30), terminal)
        .await?;
    let (status, _) = send(app.v1(&tenant.key, Method::DELETE, &run_path(&env, &session, &run))).await?;
    assert_eq!(status, StatusCode::ACCEPTED);
    let started = Instant::now();
    loop {
        let types: Vec<String> = got
            .lock()
            .map(|g| g.iter().filter_map(|b| b["type"].as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        // The completion, the failure, then both Runs reverted.
        if types.iter().filter(|t| *t == "run.reverted").count() == 2 {
            assert_eq!(types.iter().filter(|t| *t == "run.completed").count(), 1, "{types:?}");
            assert_eq!(types.iter().filter(|t| *t == "run.failed").count(), 1, "{types:?}");
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "events: {types:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let all = got.lock().map(|g| g.clone()).unwrap_or_default();
    let completed = all.iter().find(|b| b["type"] == "run.completed").cloned().unwrap_or_default();
    assert_eq!(completed["data"]["runId"], run.as_str());
    assert_eq!(completed["data"]["environmentId"], env.as_str());
    assert_eq!(completed["data"]["environmentSequence"], 1);
    assert_eq!(completed["data"]["fileDiffStatus"], "ready");
    Ok(())
}
