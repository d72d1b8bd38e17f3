//! Content retention of Platform Runs (the deployment's `RUN_CONTENT_RETENTION_DAYS`, off by
//! default): once a Run ended longer ago than the retention, the retention sweep's step erases
//! its `input`, `output` and the content of its turn's events (messages, tool calls and
//! results) and the transcript it saved, and sets `contentDeletedAt`; its status, file diff,
//! checkpoint and usage stay.

use std::time::{Duration, Instant};

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, TestNode, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn get(app: &TestApp, key: &str, path: &str) -> anyhow::Result<Value> {
    let (status, body) = send(app.v1(key, Method::GET, path)).await?;
    anyhow::ensure!(status == StatusCode::OK, "{body}");
    Ok(body["data"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_runs_content_is_erased_after_the_retention_and_its_usage_and_audit_stay() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let key = tenant.key.as_str();
    let env = app.made(key, "/environments").await?;
    let session = app.made(key, &format!("/environments/{env}/sessions")).await?;
    model.push(Reply::tool(
        "w",
        "write_file",
        &json!({"path": "/workspace/notes.txt", "content": "SECRET-TOOL-CONTENT"}),
    ));
    model.push(Reply::tool("c", "run_command", &json!({"command": "echo SECRET-COMMAND-OUTPUT"})));
    model.push(Reply::text("SECRET-OUTPUT"));
    let runs = format!("/environments/{env}/sessions/{session}/runs");
    let (status, created) =
        send(app.v1(key, Method::POST, &runs).json(&json!({"model": "m", "input": "SECRET-INPUT"}))).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{created}");
    let run_id = created["data"]["id"].as_str().unwrap_or_default().to_owned();
    let path = format!("{runs}/{run_id}");
    let started = Instant::now();
    let before = loop {
        let run = get(&app, key, &path).await?;
        if run["status"] == "completed" && run["checkpoint"]["status"] == "ready" {
            break run;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the Run never completed: {run}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (before["input"].as_str(), before["output"].as_str()),
        (Some("SECRET-INPUT"), Some("SECRET-OUTPUT"))
    );
    let session_id = session.parse()?;
    let secret = |events: &[agentplane_domain::event::Event]| {
        events.iter().filter(|e| e.data.to_string().contains("SECRET-")).count()
    };
    assert!(secret(&app.store.events().all(&session_id).await?) >= 4, "the turn's events hold its content");
    let transcript = format!("runs/{run_id}/transcript.json");
    let bucket = app.store.workspaces()?;
    assert!(bucket.written_at(&transcript).await?.is_some());

    // Off (the default): nothing goes, however late.
    let much_later = agentplane_api::edge::now().plus_seconds(400 * 86_400);
    let report = agentplane_api::jobs::erase_run_content_once(&app.app, None, much_later).await?;
    assert_eq!(report, agentplane_api::jobs::ContentReport::default());
    // Within the retention: kept.
    let now = agentplane_api::edge::now();
    let report = agentplane_api::jobs::erase_run_content_once(&app.app, Some(3_600), now).await?;
    assert_eq!(report.erased, 0, "{report:?}");
    assert_eq!(get(&app, key, &path).await?["input"], "SECRET-INPUT");

    // A tiny retention, a few seconds on: erased.
    let report =
        agentplane_api::jobs::erase_run_content_once(&app.app, Some(1), now.plus_seconds(10)).await?;
    assert_eq!((report.erased, report.failed), (1, 0), "{report:?}");
    assert!(report.events_erased >= 4, "{report:?}");
    let after = get(&app, key, &path).await?;
    assert_eq!(after["input"], "", "{after}");
    assert!(after.get("output").is_none(), "{after}");
    // What the Run did and cost stays.
    for field in [
        "status",
        "fileDiff",
        "fileDiffStatus",
        "checkpoint",
        "environmentSequence",
        "createdAt",
        "finishedAt",
    ] {
        assert_eq!(after[field], before[field], "{field}");
    }
    assert_eq!(after["usage"], before["usage"]);
    assert!(after["usage"]["sandboxRuntimeSeconds"].as_f64().is_some_and(|s| s > 0.0), "{after}");
    // The stop/rollback shape names when it was erased.
    let (status, state) = send(app.v1(key, Method::POST, &format!("{path}/stop"))).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{state}");
    assert!(state["data"]["contentDeletedAt"].as_str().is_some_and(|t| t.ends_with('Z')), "{state}");

    // The log keeps every event (type, time, turn, tool names) without their content.
    let events = app.store.events().all(&session_id).await?;
    assert_eq!(secret(&events), 0, "content left in the log: {events:?}");
    let calls: Vec<&str> = events
        .iter()
        .filter(|e| e.kind == agentplane_domain::event::EventType::ToolCall)
        .filter_map(|e| e.data["name"].as_str())
        .collect();
    assert_eq!(calls, ["write_file", "run_command"], "{events:?}");
    assert!(events.iter().any(|e| e.kind == agentplane_domain::event::EventType::Usage));
    assert_eq!(bucket.written_at(&transcript).await?, None, "the saved transcript survived");

    // Done once: a later pass has nothing left to do.
    let report =
        agentplane_api::jobs::erase_run_content_once(&app.app, Some(1), now.plus_seconds(20)).await?;
    assert_eq!(report, agentplane_api::jobs::ContentReport::default());
    Ok(())
}
