//! Session budgets end to end over HTTP: the agent's budget and the session's own, checked
//! before every model call; `pause` leaves the turn resumable (`budget_paused`) and raising the
//! budget carries the same turn on through the runs queue; `stop` ends it (`budget_reached`);
//! the errors a budget causes carry what was spent of what; an unpriced model is refused.

use std::time::{Duration, Instant};

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// A tiny budget: the first model call (gpt-4o-mini, 12 in / 7 out tokens) costs more.
const TINY: f64 = 0.000_001;
/// What that first call costs: 12 × $0.15/M + 7 × $0.60/M.
const FIRST_CALL: f64 = 0.000_006;

#[track_caller]
fn assert_spent(spent: &Value, expected: f64) {
    let got = spent.as_f64().unwrap_or(f64::NAN);
    assert!((got - expected).abs() < 1e-12, "spent {spent}, expected {expected}");
}

async fn setup(execution: Value) -> anyhow::Result<(ScriptedModel, TestApp, Tenant, String)> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "thrifty", "model": "gpt-4o-mini", "tools": ["add"], "config": {"execution": execution}}),
        )
        .await?;
    Ok((model, app, tenant, agent))
}

async fn events(app: &TestApp, tenant: &Tenant, session: &str) -> anyhow::Result<Vec<String>> {
    let (status, page) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/events?limit=100"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {page}");
    Ok(page["data"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["type"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default())
}

async fn session(app: &TestApp, tenant: &Tenant, id: &str) -> anyhow::Result<Value> {
    let (status, body) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{id}"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    Ok(body)
}

async fn patch(app: &TestApp, tenant: &Tenant, id: &str, body: Value) -> anyhow::Result<(StatusCode, Value)> {
    send(app.client(&tenant.key, Method::PATCH, &format!("/sessions/{id}")).json(&body)).await
}

async fn until_idle(app: &TestApp, tenant: &Tenant, id: &str) -> anyhow::Result<Value> {
    let started = Instant::now();
    loop {
        let body = session(app, tenant, id).await?;
        if body["runtime_status"] == "idle" {
            return Ok(body);
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "the turn did not carry on: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_agents_budget_pauses_a_turn_and_raising_the_sessions_budget_carries_it_on() -> R {
    let (model, app, tenant, agent) = setup(json!({"max_cost_usd": TINY})).await?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    model.push(Reply::text("it is 5"));
    let (status, paused) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "input": "add 2 and 3"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(
        (paused["status"].clone(), paused["stop_reason"].clone()),
        (json!("incomplete"), json!("budget_reached"))
    );
    assert_eq!(paused["incomplete_details"]["reason"], "budget_paused");
    assert_eq!(paused["incomplete_details"]["max_cost_usd"], TINY);
    assert_spent(&paused["incomplete_details"]["spent_usd"], FIRST_CALL);
    let id = str_field(&paused, "session_id")?;
    assert_eq!(session(&app, &tenant, &id).await?["runtime_status"], "budget_paused");
    assert_eq!(
        events(&app, &tenant, &id).await?,
        ["turn.started", "message.user", "usage", "tool.call", "tool.result", "budget.reached"]
    );
    assert_eq!(model.requests().len(), 1);

    // A new message: 409 with what was spent of what.
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{id}/messages"))
            .json(&json!({"input": "more"})),
    )
    .await?;
    assert_error((status, &body), StatusCode::CONFLICT, "budget_paused");
    assert_eq!(body["error"]["max_cost_usd"], TINY);
    assert_spent(&body["error"]["spent_usd"], FIRST_CALL);

    // Lowering it (or leaving it reached) does nothing.
    let (status, body) = patch(&app, &tenant, &id, json!({"budget": {"max_cost_usd": TINY / 2.0}})).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["budget"], json!({"max_cost_usd": TINY / 2.0, "on_exceed": "pause"}));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(session(&app, &tenant, &id).await?["runtime_status"], "budget_paused");
    assert_eq!(model.requests().len(), 1);

    // Raised above the spend: the same turn carries on.
    let (status, body) = patch(&app, &tenant, &id, json!({"budget": {"max_cost_usd": 5.0}})).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let done = until_idle(&app, &tenant, &id).await?;
    assert_eq!(done["stop_reason"], "end_turn");
    assert_eq!(
        events(&app, &tenant, &id).await?,
        [
            "turn.started",
            "message.user",
            "usage",
            "tool.call",
            "tool.result",
            "budget.reached",
            "usage",
            "message.assistant",
            "turn.ended"
        ]
    );
    assert_eq!(model.requests().len(), 2);
    Ok(())
}

#[tokio::test]
async fn a_session_budget_with_stop_ends_the_turn_with_budget_reached() -> R {
    let (model, app, tenant, agent) = setup(json!({})).await?;
    let (status, created) = send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({
        "agent_id": agent, "budget": {"max_cost_usd": TINY, "on_exceed": "stop"}
    })))
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["budget"], json!({"max_cost_usd": TINY, "on_exceed": "stop"}));
    let id = str_field(&created, "id")?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    model.push(Reply::text("never asked"));
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{id}/messages"))
            .json(&json!({"input": "add"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (body["status"].clone(), body["stop_reason"].clone()),
        (json!("incomplete"), json!("budget_reached"))
    );
    assert_eq!(body["incomplete_details"]["reason"], "budget_reached");
    let done = session(&app, &tenant, &id).await?;
    assert_eq!(
        (done["runtime_status"].clone(), done["stop_reason"].clone()),
        (json!("idle"), json!("budget_reached"))
    );
    assert_eq!(model.requests().len(), 1);
    let log = events(&app, &tenant, &id).await?;
    assert_eq!(log.iter().rev().take(2).cloned().collect::<Vec<_>>(), ["turn.ended", "budget.reached"]);
    // The next turn stops before any model call.
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{id}/messages"))
            .json(&json!({"input": "again"})),
    )
    .await?;
    assert_eq!((status, body["stop_reason"].clone()), (StatusCode::OK, json!("budget_reached")), "{body}");
    assert_eq!(model.requests().len(), 1);
    // Removing the session's budget (the agent has none) lets turns run again.
    let (status, body) = patch(&app, &tenant, &id, json!({"budget": null})).await?;
    assert_eq!((status, body["budget"].clone()), (StatusCode::OK, Value::Null));
    model.push(Reply::text("free again"));
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{id}/messages"))
            .json(&json!({"input": "now"})),
    )
    .await?;
    assert_eq!((status, body["status"].clone()), (StatusCode::OK, json!("completed")), "{body}");
    Ok(())
}

#[tokio::test]
async fn an_unpriced_model_is_refused_where_a_budget_applies_and_budgets_validate() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "x", "model": "an-unpriced-model", "config": {"execution": {"max_cost_usd": 1.0}}}),
        )
        .await?;
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/responses").json(&json!({"agent": agent, "input": "hi"})),
    )
    .await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "model_not_priced");
    assert!(model.requests().is_empty());
    for (budget, param) in [
        (json!({"max_cost_usd": -1}), "budget.max_cost_usd"),
        (json!({"max_cost_usd": 1, "on_exceed": "explode"}), "budget.on_exceed"),
        (json!({"max_cost_usd": "1"}), "budget.max_cost_usd"),
        (json!({"max_cost_usd": 1, "extra": true}), "budget.extra"),
    ] {
        let (status, body) =
            send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"budget": budget}))).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{budget}: {body}");
        assert_eq!(body["error"]["param"], param, "{budget}: {body}");
    }
    Ok(())
}

#[tokio::test]
async fn cancelling_a_turn_paused_by_its_budget_frees_the_session() -> R {
    let (model, app, tenant, agent) = setup(json!({"max_cost_usd": TINY})).await?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    let (_, paused) = send(
        app.client(&tenant.key, Method::POST, "/responses").json(&json!({"agent": agent, "input": "add"})),
    )
    .await?;
    let id = str_field(&paused, "session_id")?;
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, &format!("/sessions/{id}/cancel"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (body["runtime_status"].clone(), body["stop_reason"].clone()),
        (json!("idle"), json!("cancelled"))
    );
    // Raising the budget now carries nothing on.
    let (status, body) = patch(&app, &tenant, &id, json!({"budget": {"max_cost_usd": 5.0}})).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["budget"], json!({"max_cost_usd": 5.0, "on_exceed": "pause"}));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(model.requests().len(), 1);
    assert_eq!(events(&app, &tenant, &id).await?.last().map(String::as_str), Some("turn.ended"));
    Ok(())
}

#[tokio::test]
async fn a_budget_raise_whose_continuation_could_not_be_sent_is_carried_on_by_the_sweep() -> R {
    let model = ScriptedModel::start().await?;
    // The API cannot reach the runs queue (as when SQS refuses a send).
    let app = TestApp::spawn_with_model_and(&model, |mut app| {
        app.store.runs = None;
        app
    })
    .await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "thrifty", "model": "gpt-4o-mini", "tools": ["add"], "config": {"execution": {"max_cost_usd": TINY}}}),
        )
        .await?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    model.push(Reply::text("it is 5"));
    let (status, paused) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "input": "add 2 and 3"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{paused}");
    let id = str_field(&paused, "session_id")?;
    assert_eq!(session(&app, &tenant, &id).await?["runtime_status"], "budget_paused");
    // The raise is recorded (200) though its continuation could not be sent.
    let (status, body) = patch(&app, &tenant, &id, json!({"budget": {"max_cost_usd": 5.0}})).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(session(&app, &tenant, &id).await?["runtime_status"], "budget_paused");
    // The sweep's pass carries it on; the turn ends.
    let resumed =
        agentplane_engine::tenant_resume::carry_on_tenant_pauses(&app.store, agentplane_api::edge::now())
            .await?;
    assert_eq!(resumed.continued, 1, "{resumed:?}");
    let mut full = app.app.clone();
    full.store = app.store.clone();
    assert!(agentplane_api::jobs::consume_runs_once(&full, 5).await? >= 1);
    let done = until_idle(&app, &tenant, &id).await?;
    assert_eq!(done["stop_reason"], "end_turn");
    assert_eq!(model.requests().len(), 2);
    Ok(())
}
