//! Seed 002: a turn the tenant's monthly spend limit paused carries on once the limit allows
//! it again (raised, removed, or a new month), exactly once.

use std::time::{Duration, Instant};

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// A tenant whose limit is passed by one model call, a project of it, an agent with a tool,
/// and a turn paused by the limit after its first call: (tenant id, project, session id).
async fn paused_turn(app: &TestApp, model: &ScriptedModel) -> anyhow::Result<(String, Tenant, String)> {
    let (status, tenant) = send(
        app.core(Method::POST, "/core/v1/tenants")
            .json(&json!({"name": "t", "monthly_spend_limit_usd": 0.000_000_001})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {tenant}");
    let tenant_id = str_field(&tenant, "id")?;
    let project = app.tenant().await?;
    let path = format!("/core/v1/tenants/{tenant_id}/projects/{}", project.project_id);
    assert_eq!(send(app.core(Method::PUT, &path)).await?.0, StatusCode::OK);
    let agent = app
        .create_agent(&project.key, json!({"name": "a", "model": "gpt-4o-mini", "tools": ["add"]}))
        .await?;
    model.push(Reply::tool("c1", "add", &json!({"a": 1, "b": 2})));
    model.push(Reply::text("it is 3"));
    let (status, body) = send(
        app.client(&project.key, Method::POST, "/responses").json(&json!({"agent": agent, "input": "add"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "incomplete", "{body}");
    let session = str_field(&body, "session_id")?;
    until(app, &project, &session, "budget_paused").await?;
    assert_eq!(model.requests().len(), 1);
    Ok((tenant_id, project, session))
}

async fn until(app: &TestApp, project: &Tenant, session: &str, status: &str) -> anyhow::Result<Value> {
    let started = Instant::now();
    loop {
        let (_, s) = send(app.client(&project.key, Method::GET, &format!("/sessions/{session}"))).await?;
        if s["runtime_status"] == status {
            return Ok(s);
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "not {status}: {s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn events(app: &TestApp, project: &Tenant, session: &str) -> anyhow::Result<Vec<String>> {
    let (status, body) =
        send(app.client(&project.key, Method::GET, &format!("/sessions/{session}/events?limit=100"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    Ok(body["data"]
        .as_array()
        .map(|events| events.iter().filter_map(|e| e["type"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default())
}

#[tokio::test]
async fn raising_the_tenants_limit_carries_the_paused_turn_on_exactly_once() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let (tenant_id, project, session) = paused_turn(&app, &model).await?;

    // Two raises at once: both may carry the turn on; it runs on once.
    let raise = || {
        send(
            app.core(Method::PATCH, &format!("/core/v1/tenants/{tenant_id}"))
                .json(&json!({"monthly_spend_limit_usd": 100})),
        )
    };
    let (a, b) = tokio::join!(raise(), raise());
    assert_eq!((a?.0, b?.0), (StatusCode::OK, StatusCode::OK));
    let done = until(&app, &project, &session, "idle").await?;
    assert_eq!(done["stop_reason"], "end_turn", "{done}");
    app.drained().await?;
    assert_eq!(model.requests().len(), 2);
    let log = events(&app, &project, &session).await?;
    assert_eq!(log.iter().filter(|e| *e == "message.assistant").count(), 1, "{log:?}");
    assert_eq!(log.iter().filter(|e| *e == "turn.ended").count(), 1, "{log:?}");
    assert_eq!(log.last().map(String::as_str), Some("turn.ended"), "{log:?}");

    // A later raise finds nothing paused: nothing runs.
    let (status, _) = raise().await?;
    assert_eq!(status, StatusCode::OK);
    app.drained().await?;
    assert_eq!(model.requests().len(), 2);
    Ok(())
}

#[tokio::test]
async fn a_raise_that_leaves_the_limit_reached_does_nothing() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let (tenant_id, project, session) = paused_turn(&app, &model).await?;
    let (status, _) = send(
        app.core(Method::PATCH, &format!("/core/v1/tenants/{tenant_id}"))
            .json(&json!({"monthly_spend_limit_usd": 0.000_000_002})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK);
    app.drained().await?;
    assert_eq!(model.requests().len(), 1);
    until(&app, &project, &session, "budget_paused").await?;

    // Removing the limit carries it on.
    let (status, _) = send(
        app.core(Method::PATCH, &format!("/core/v1/tenants/{tenant_id}"))
            .json(&json!({"monthly_spend_limit_usd": null})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK);
    until(&app, &project, &session, "idle").await?;
    assert_eq!(model.requests().len(), 2);
    Ok(())
}

#[tokio::test]
async fn the_sweep_carries_on_a_pause_whose_tenant_has_room_again() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let (tenant_id, project, session) = paused_turn(&app, &model).await?;
    // Nothing has room yet: the sweep leaves it.
    assert_eq!(app.sweep().await?.tenant_pauses_continued, 0);
    assert_eq!(model.requests().len(), 1);
    // Room without a PATCH (what a new month does, or a raise that raced the pause).
    app.store.tenants().set_limit(&tenant_id.parse()?, None).await?;
    assert_eq!(app.sweep().await?.tenant_pauses_continued, 1);
    until(&app, &project, &session, "idle").await?;
    assert_eq!(model.requests().len(), 2);
    // Once carried on, the pause is forgotten.
    assert_eq!(app.sweep().await?.tenant_pauses_continued, 0);
    app.drained().await?;
    assert_eq!(model.requests().len(), 2);
    Ok(())
}
