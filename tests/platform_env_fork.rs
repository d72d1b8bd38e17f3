//! Fork: `POST /v1/environments {snapshotId}` makes an environment whose workspace starts as a
//! checkpoint another environment of the project returned (its `initialCheckpoint.snapshotId`
//! or a Run's `checkpoint.snapshotId`), readable through `/files` at once, with its own
//! sequence from 1. Another project's checkpoint, or none, is a 404; the source is untouched.

use std::time::{Duration, Instant};

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, TestNode, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn made(app: &TestApp, key: &str, path: &str, body: Value) -> anyhow::Result<Value> {
    let (status, made) = send(app.v1(key, Method::POST, path).json(&body)).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{path}: {made}");
    Ok(made["data"].clone())
}

fn id(value: &Value) -> String {
    value["id"].as_str().unwrap_or_default().to_owned()
}

async fn put_file(app: &TestApp, key: &str, env: &str, path: &str, bytes: &[u8]) -> R {
    let (status, body) = send(
        app.v1(key, Method::PUT, &format!("/environments/{env}/files?path={path}")).body(bytes.to_vec()),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::OK, "{body}");
    Ok(())
}

async fn read(app: &TestApp, key: &str, env: &str, path: &str) -> anyhow::Result<(StatusCode, Vec<u8>)> {
    let response = app.v1(key, Method::GET, &format!("/environments/{env}/files?path={path}")).send().await?;
    Ok((response.status(), response.bytes().await?.to_vec()))
}

async fn listing(app: &TestApp, key: &str, env: &str) -> anyhow::Result<Vec<String>> {
    let (status, body) = send(app.v1(key, Method::GET, &format!("/environments/{env}/files"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{body}");
    Ok(body["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["path"].as_str().map(str::to_owned))
        .collect())
}

async fn finished(app: &TestApp, key: &str, path: &str) -> anyhow::Result<Value> {
    let started = Instant::now();
    loop {
        let (_, body) = send(app.v1(key, Method::GET, path)).await?;
        if body["data"]["status"] == "completed" && body["data"]["checkpoint"]["status"] == "ready" {
            return Ok(body["data"].clone());
        }
        anyhow::ensure!(body["data"]["status"] != "failed", "{body}");
        anyhow::ensure!(started.elapsed() < Duration::from_secs(60), "the Run never completed: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn code(body: &Value) -> &str {
    body.pointer("/error/code").and_then(Value::as_str).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fork_starts_as_an_initial_or_run_checkpoint_of_its_project() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let key = tenant.key.as_str();
    let source = id(&made(&app, key, "/environments", json!({})).await?);
    let session = id(&made(&app, key, &format!("/environments/{source}/sessions"), json!({})).await?);
    put_file(&app, key, &source, "/workspace/a.txt", b"one").await?;
    model.push(Reply::tool("w", "write_file", &json!({"path": "/workspace/b.txt", "content": "two"})));
    model.push(Reply::text("done"));
    let runs = format!("/environments/{source}/sessions/{session}/runs");
    let (status, created) =
        send(app.v1(key, Method::POST, &runs).json(&json!({"model": "m", "input": "go"}))).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{created}");
    let run = finished(&app, key, &format!("{runs}/{}", id(&created["data"]))).await?;
    let after_run = run["checkpoint"]["snapshotId"].as_str().unwrap_or_default().to_owned();
    // The source moves on after its checkpoint.
    put_file(&app, key, &source, "/workspace/a.txt", b"changed").await?;
    let (_, got) = send(app.v1(key, Method::GET, &format!("/environments/{source}"))).await?;
    let initial = got["data"]["initialCheckpoint"]["snapshotId"].as_str().unwrap_or_default().to_owned();
    assert_eq!(initial.len(), 64, "the environment returns its initial checkpoint: {got}");

    // A fork of the Run's checkpoint: its files as they were then.
    let fork = made(&app, key, "/environments", json!({"name": "fork", "snapshotId": after_run})).await?;
    assert_eq!(fork["runCount"], 0, "{fork}");
    assert_eq!(fork["initialCheckpoint"]["snapshotId"], after_run.as_str(), "{fork}");
    let forked = id(&fork);
    assert_ne!(forked, source);
    assert_eq!(listing(&app, key, &forked).await?, ["/workspace/a.txt", "/workspace/b.txt"]);
    assert_eq!(read(&app, key, &forked, "/workspace/a.txt").await?, (StatusCode::OK, b"one".to_vec()));
    assert_eq!(read(&app, key, &forked, "/workspace/b.txt").await?, (StatusCode::OK, b"two".to_vec()));

    // A fork of the initial checkpoint: before the Run.
    let early = id(&made(&app, key, "/environments", json!({"snapshotId": initial})).await?);
    assert_eq!(listing(&app, key, &early).await?, ["/workspace/a.txt"]);

    // The fork is independent: its writes leave the source alone, and the source's files are
    // its own still.
    put_file(&app, key, &forked, "/workspace/a.txt", b"fork's own").await?;
    assert_eq!(read(&app, key, &source, "/workspace/a.txt").await?, (StatusCode::OK, b"changed".to_vec()));

    // Its Runs are numbered from 1.
    let fork_session = id(&made(&app, key, &format!("/environments/{forked}/sessions"), json!({})).await?);
    model.push(Reply::text("fork done"));
    let (status, fork_run) = send(
        app.v1(key, Method::POST, &format!("/environments/{forked}/sessions/{fork_session}/runs"))
            .json(&json!({"model": "m", "input": "go"})),
    )
    .await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{fork_run}");
    assert_eq!(fork_run["data"]["environmentSequence"], 1, "{fork_run}");

    // Another project cannot fork this project's checkpoints; unknown and malformed ids fail.
    let stranger = app.tenant().await?;
    for snapshot in [&after_run, &initial] {
        let (status, body) =
            send(app.v1(&stranger.key, Method::POST, "/environments").json(&json!({"snapshotId": snapshot})))
                .await?;
        assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "snapshot_not_found"), "{body}");
    }
    let (_, theirs) = send(app.v1(&stranger.key, Method::GET, "/environments")).await?;
    assert_eq!(theirs["data"], json!([]), "a refused fork made no environment: {theirs}");
    let (status, body) =
        send(app.v1(key, Method::POST, "/environments").json(&json!({"snapshotId": "f".repeat(64)}))).await?;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "snapshot_not_found"), "{body}");
    let (status, body) =
        send(app.v1(key, Method::POST, "/environments").json(&json!({"snapshotId": "../etc"}))).await?;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, "invalid_request"), "{body}");

    // Once every environment that returned a checkpoint is deleted, it is not forkable.
    for env in [&source, &early] {
        let (status, _) = send(app.v1(key, Method::DELETE, &format!("/environments/{env}"))).await?;
        assert_eq!(status, StatusCode::ACCEPTED);
    }
    let (status, body) =
        send(app.v1(key, Method::POST, "/environments").json(&json!({"snapshotId": initial}))).await?;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "snapshot_not_found"), "{body}");
    Ok(())
}
