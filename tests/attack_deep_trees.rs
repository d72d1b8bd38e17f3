//! Attack (issue 24, item 1): a Platform Run whose command builds a 2,500-deep tree of folders.
//! The node used to walk the workspace recursively, so the Run's end checkpoint overflowed the
//! stack and aborted the process — in the embedded setup (and in this test binary, where the
//! node runs in-process too) every surface went down, and the Run stayed `running` with its
//! checkpoint `pending`. Now the walk is iterative and capped: the checkpoint ends `failed` with
//! a fixed message, the Run settles, the file listing answers `workspace_too_large`, and the
//! gateway keeps answering.

use std::time::{Duration, Instant};

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, TestNode, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// The fixed text a Run records when its checkpoint meets the depth cap.
const DEPTH_FAILURE: &str =
    "checkpoint_failed: workspace_too_large: the workspace holds a path of more than 64 components";

/// Creates a Run and polls it until it is no longer queued or running (bounded).
async fn run_to_end(app: &TestApp, key: &str, runs: &str, input: &str) -> anyhow::Result<Value> {
    let (status, created) =
        send(app.v1(key, Method::POST, runs).json(&json!({"model": "m", "input": input}))).await?;
    anyhow::ensure!(status == StatusCode::ACCEPTED, "{created}");
    let path = format!("{runs}/{}", created["data"]["id"].as_str().unwrap_or_default());
    let started = Instant::now();
    loop {
        let (status, body) = send(app.v1(key, Method::GET, &path)).await?;
        anyhow::ensure!(status == StatusCode::OK, "{body}");
        if matches!(body["data"]["status"].as_str(), Some("completed" | "failed" | "stopped")) {
            return Ok(body["data"].clone());
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(180), "the Run never settled: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The tool result the model was sent for `call`.
fn tool_result(model: &ScriptedModel, call: &str) -> Value {
    model
        .requests()
        .iter()
        .rev()
        .find_map(|r| {
            r["messages"].as_array()?.iter().find_map(|m| {
                (m["role"] == "tool" && m["tool_call_id"] == call).then(|| {
                    serde_json::from_str(m["content"].as_str().unwrap_or("null")).unwrap_or_default()
                })
            })
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn attack_a_run_that_builds_2500_nested_folders_fails_its_checkpoint_and_the_gateway_stays_up() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    let runs = format!("/environments/{env}/sessions/{session}/runs");
    let (status, body) = send(
        app.v1(&tenant.key, Method::PUT, &format!("/environments/{env}/files?path=/workspace/seed.txt"))
            .body("seed"),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");

    // The attacker's command, as reported.
    let command = "python3 -c \"import os\nfor i in range(2500): os.mkdir('d'); os.chdir('d')\"";
    model.push(Reply::tool("c1", "run_command", &json!({ "command": command })));
    model.push(Reply::text("Made some folders."));
    let run = run_to_end(&app, &tenant.key, &runs, "Make folders").await?;
    assert_eq!(tool_result(&model, "c1")["exitCode"], 0, "{}", tool_result(&model, "c1"));

    // The Run settled; its end checkpoint failed with the fixed text (no URL, no host path,
    // nothing the node or the bucket said), and so did its diff.
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["output"], "Made some folders.");
    assert_eq!(run["checkpoint"]["status"], "failed", "{run}");
    assert_eq!(run["checkpoint"]["error"], DEPTH_FAILURE, "{run}");
    assert!(run["checkpoint"].get("snapshotId").is_none_or(Value::is_null), "{run}");
    assert_eq!(run["fileDiffStatus"], "failed", "{run}");

    // The listing over that tree answers the named error in the Platform envelope.
    let files = format!("/environments/{env}/files");
    let (status, body) = send(app.v1(&tenant.key, Method::GET, &files)).await?;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "workspace_too_large", "{body}");
    assert_eq!(body["error"]["message"], "the workspace holds a path of more than 64 components");
    assert_eq!(body["error"]["details"], json!({"cap": "depth", "limit": 64}));
    assert!(body["error"]["requestId"].as_str().is_some_and(|id| id.starts_with("req_")), "{body}");

    // Asked again (the crash used to repeat on every listing), the gateway and node still answer,
    // and a single file is still written and read.
    let (status, again) = send(app.v1(&tenant.key, Method::GET, &files)).await?;
    assert_eq!(
        (status, again["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("workspace_too_large"))
    );
    let (status, body) = send(
        app.v1(&tenant.key, Method::PUT, &format!("{files}?path=/workspace/note.txt")).body("still here"),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let read = app.v1(&tenant.key, Method::GET, &format!("{files}?path=/workspace/note.txt")).send().await?;
    assert_eq!(read.status(), StatusCode::OK);
    assert_eq!(read.bytes().await?.as_ref(), b"still here");

    // The next Run cannot checkpoint its start over that tree: it settles `failed` at once with
    // the same fixed text, without a model call.
    let calls = model.requests().len();
    let next = run_to_end(&app, &tenant.key, &runs, "Anything").await?;
    assert_eq!(next["status"], "failed", "{next}");
    // (The GET shape has no `error`; the stored Run's is what the stop/rollback shape renders.)
    let project = tenant.project_id.parse()?;
    let stored = app.store.runs().get(&project, &next["id"].as_str().unwrap_or_default().parse()?).await?;
    let error = stored.error.ok_or_else(|| anyhow::anyhow!("the failed Run has no error"))?;
    assert_eq!(error.code, "checkpoint_failed");
    assert_eq!(error.message, "workspace_too_large: the workspace holds a path of more than 64 components");
    assert_eq!(model.requests().len(), calls);

    // A rollback of the first Run still restores the workspace: the node cannot list the tree,
    // so it clears it (iteratively, however deep) and fetches the manifest's files.
    let first = format!("{runs}/{}", run["id"].as_str().unwrap_or_default());
    let (status, accepted) = send(app.v1(&tenant.key, Method::DELETE, &first)).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let started = Instant::now();
    loop {
        let (_, body) = send(app.v1(&tenant.key, Method::GET, &first)).await?;
        if body["data"]["status"] == "reverted" {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(180), "the rollback never ended: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, listed) = send(app.v1(&tenant.key, Method::GET, &files)).await?;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let paths: Vec<&str> =
        listed["data"].as_array().into_iter().flatten().filter_map(|f| f["path"].as_str()).collect();
    assert_eq!(paths, ["/workspace/seed.txt"], "{listed}");
    Ok(())
}
