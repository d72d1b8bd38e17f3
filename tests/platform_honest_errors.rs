//! A Run's `error`, its `checkpoint.error` and its `fileDiffError`, read through `/v1`, are a
//! stable code and a fixed message: never the text of an internal error (a presigned URL with
//! its `X-Amz-` signature, a credential, a host path, a provider's answer). Whatever the
//! executor recorded stays in the item and the log.

use std::time::{Duration, Instant};

use agentplane_domain::ProjectId;
use agentplane_domain::platform::run::{CheckpointStatus, DiffStatus, RunError, RunId, RunStatus};
use agentplane_tests::model::ScriptedModel;
use agentplane_tests::{TestApp, TestNode, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn made(app: &TestApp, key: &str, path: &str, body: Value) -> anyhow::Result<String> {
    let (status, answer) = send(app.v1(key, Method::POST, path).json(&body)).await?;
    anyhow::ensure!(status.is_success(), "{path}: {status} {answer}");
    Ok(answer["data"]["id"].as_str().unwrap_or_default().to_owned())
}

/// What must never reach a client of a Run's diagnostics.
const SECRETS: &[&str] =
    &["http", "x-amz-", "akia", "/var/lib", "/tmp/", ".agentplane", "10.0.0.7", "4566", "s3://", "secret"];

fn leaked(text: &str) -> Vec<&'static str> {
    let lower = text.to_ascii_lowercase();
    SECRETS.iter().copied().filter(|s| lower.contains(s)).collect()
}

/// Every diagnostic of a Run answer (`error`, `checkpoint.error`, `fileDiffError`), as text.
fn diagnostics(run: &Value) -> String {
    format!("{} {} {}", run["error"], run["checkpoint"]["error"], run["fileDiffError"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn recorded_internal_texts_are_shown_as_fixed_codes_and_messages() -> R {
    let app = TestApp::spawn_without_runs_consumer().await?;
    let tenant = app.tenant().await?;
    let env = made(&app, &tenant.key, "/environments", json!({})).await?;
    let session = made(&app, &tenant.key, &format!("/environments/{env}/sessions"), json!({})).await?;
    let runs = format!("/environments/{env}/sessions/{session}/runs");
    let id = made(&app, &tenant.key, &runs, json!({"model": "m", "input": "x"})).await?;

    // What an executor records today when the node or storage fails with its own text.
    let project: ProjectId = tenant.project_id.parse()?;
    let run_id: RunId = id.parse().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let mut run = app.store.runs().get(&project, &run_id).await?;
    let expected = run.version;
    run.status = RunStatus::Failed;
    run.error = Some(RunError {
        code: "storage_unavailable".into(),
        message: "storage failed during the Run: dispatch failure: http://10.0.0.7:4566/agentplane-main \
                  (credentials AKIAEXAMPLE/secret)"
            .into(),
    });
    run.checkpoint.status = CheckpointStatus::Failed;
    run.checkpoint.error = Some(
        "checkpoint_failed: upload of /var/lib/agentplane-node/sandboxes/sbx/workspace/a.txt to \
         https://agentplane-workspaces.s3.amazonaws.com/blobs/sha256/ab?X-Amz-Credential=AKIAEXAMPLE&X-Amz-Signature=f00 failed"
            .into(),
    );
    run.file_diff_status = DiffStatus::Failed;
    run.file_diff_error = Some("reading s3://agentplane-workspaces/runs/x/manifest.json: 403".into());
    run.version = expected + 1;
    app.store.runs().replace(&run, expected).await?;

    // The GET shape, the list and the stop shape (which carries `error`).
    let (status, got) = send(app.v1(&tenant.key, Method::GET, &format!("{runs}/{id}"))).await?;
    assert_eq!(status, StatusCode::OK, "{got}");
    let (status, list) = send(app.v1(&tenant.key, Method::GET, &runs)).await?;
    assert_eq!(status, StatusCode::OK, "{list}");
    let (status, stopped) = send(app.v1(&tenant.key, Method::POST, &format!("{runs}/{id}/stop"))).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{stopped}");
    for answer in [&got["data"], &list["data"][0], &stopped["data"]] {
        let text = diagnostics(answer);
        assert!(leaked(&text).is_empty(), "leaked {:?}: {text}", leaked(&text));
    }
    let data = &stopped["data"];
    assert_eq!(
        data["error"],
        json!({"code": "storage_unavailable", "message": "storage was unavailable during the Run"})
    );
    assert_eq!(
        got["data"]["checkpoint"],
        json!({"status": "failed", "error": "checkpoint_failed: internal_error: the checkpoint could not be taken"})
    );
    assert_eq!(got["data"]["fileDiffError"], "the file diff could not be computed");
    // The detail is still in the item, for operators.
    let stored = app.store.runs().get(&project, &run_id).await?;
    assert!(stored.error.is_some_and(|e| e.message.contains("dispatch failure")));
    Ok(())
}

/// A model provider whose answer cannot be read and quotes an internal URL: the Run fails with
/// `model_invalid_response` and a fixed message, not the parser's text (which quotes the answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_runs_error_never_quotes_the_providers_answer() -> R {
    let leak =
        "http://10.0.0.7:4566/agentplane-workspaces/blobs?X-Amz-Credential=AKIAEXAMPLE&X-Amz-Signature=f00";
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || async move { axum::Json(json!({"choices": leak})) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base_url = format!("http://{}/v1", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });
    let scripted = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model_and(&scripted, move |app| {
        app.with_model(agentplane_engine::ModelConfig {
            base_url,
            api_key: Some("sk-test".into()),
            call_timeout: Duration::from_secs(3),
            max_retries: 0,
            initial_backoff: Duration::from_millis(20),
        })
    })
    .await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = made(&app, &tenant.key, "/environments", json!({})).await?;
    let session = made(&app, &tenant.key, &format!("/environments/{env}/sessions"), json!({})).await?;
    let runs = format!("/environments/{env}/sessions/{session}/runs");
    let id = made(&app, &tenant.key, &runs, json!({"model": "gpt-test", "input": "hi"})).await?;

    let started = Instant::now();
    let done = loop {
        let (status, body) = send(app.v1(&tenant.key, Method::GET, &format!("{runs}/{id}"))).await?;
        anyhow::ensure!(status == StatusCode::OK, "{body}");
        if matches!(body["data"]["status"].as_str(), Some("completed" | "failed" | "stopped")) {
            break body;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(90), "the Run never ended: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(done["data"]["status"], "failed", "{done}");
    // The stop shape carries the error (a finished Run stays as it is).
    let (status, state) = send(app.v1(&tenant.key, Method::POST, &format!("{runs}/{id}/stop"))).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{state}");
    let error = &state["data"]["error"];
    assert_eq!(error["code"], "model_invalid_response", "{state}");
    let text = diagnostics(&state["data"]);
    assert!(leaked(&text).is_empty(), "leaked {:?}: {text}", leaked(&text));
    Ok(())
}
