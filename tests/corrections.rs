//! Corrections to the client API: agent settings under `config`, documented fields that are
//! refused rather than ignored, the legacy error shape kept to the two Responses routes,
//! unpriced spend, sessions whose turn died, and sessions naming another project's agent.

use agentplane_domain::session::{RuntimeStatus, StopReason};
use agentplane_domain::{ProjectId, SessionId};
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn setup() -> anyhow::Result<(ScriptedModel, TestApp, Tenant)> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    Ok((model, app, tenant))
}

async fn agent_with(app: &TestApp, tenant: &Tenant, model: &str) -> anyhow::Result<String> {
    app.create_agent(&tenant.key, json!({"name": "helper", "model": model})).await
}

async fn respond(app: &TestApp, tenant: &Tenant, body: Value) -> anyhow::Result<(StatusCode, Value)> {
    send(app.client(&tenant.key, Method::POST, "/responses").json(&body)).await
}

async fn get(app: &TestApp, tenant: &Tenant, path: &str) -> anyhow::Result<Value> {
    let (status, body) = send(app.client(&tenant.key, Method::GET, path)).await?;
    anyhow::ensure!(status == StatusCode::OK, "GET {path}: {status} {body}");
    Ok(body)
}

async fn session_ids(app: &TestApp, tenant: &Tenant) -> anyhow::Result<Vec<String>> {
    let list = get(app, tenant, "/sessions?limit=100").await?;
    Ok(list["data"]
        .as_array()
        .map(|d| d.iter().filter_map(|s| s["id"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default())
}

fn message(body: &Value) -> &str {
    body.pointer("/error/message").and_then(Value::as_str).unwrap_or("")
}

#[tokio::test]
async fn agent_settings_live_under_config_and_a_patch_changes_only_what_it_names() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let (status, created) = send(app.client(&tenant.key, Method::POST, "/agents").json(&json!({
        "name": "support", "model": "gpt-4o-mini",
        "config": {
            "execution": {"sync_timeout_ms": 5000, "max_cost_usd": 2.5, "budget_action": "stop"},
            "attachments": {"enabled": true, "max_files": 3},
            "humanInTheLoop": {"tool_approvals": ["add"], "questions_enabled": true},
        },
    })))
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = str_field(&created, "id")?;
    for agent in [created.clone(), get(&app, &tenant, &format!("/agents/{id}")).await?] {
        let config = &agent["config"];
        assert_eq!(config["execution"]["sync_timeout_ms"], 5000, "{agent}");
        assert_eq!(config["execution"]["max_cost_usd"], 2.5);
        assert_eq!(config["execution"]["budget_action"], "stop");
        // What was not given keeps the spec's default.
        assert_eq!(config["execution"]["background_max_duration_ms"], 1_800_000);
        assert_eq!(config["attachments"]["enabled"], true);
        assert_eq!(config["attachments"]["max_files"], 3);
        assert_eq!(config["attachments"]["max_file_bytes"], 20 * 1024 * 1024);
        assert_eq!(config["humanInTheLoop"]["tool_approvals"], json!(["add"]));
        assert_eq!(config["humanInTheLoop"]["approval_timeout_minutes"], 1440);
        for moved in ["execution", "attachments", "humanInTheLoop"] {
            assert!(agent.get(moved).is_none(), "`{moved}` is read under config only: {agent}");
        }
    }

    // One field of config.execution changes; every other setting stays.
    let (status, patched) = send(
        app.client(&tenant.key, Method::PATCH, &format!("/agents/{id}"))
            .json(&json!({"config": {"execution": {"sync_timeout_ms": 4000}}})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{patched}");
    let read = get(&app, &tenant, &format!("/agents/{id}")).await?;
    assert_eq!(patched["config"], read["config"]);
    let mut expected = created["config"].clone();
    expected["execution"]["sync_timeout_ms"] = json!(4000);
    assert_eq!(read["config"], expected);
    let project: ProjectId = tenant.project_id.parse()?;
    let stored = app.store.agents().get(&project, &id.parse()?).await?;
    assert_eq!(stored.execution.sync_timeout_ms, 4000);
    assert_eq!(stored.execution.max_cost_usd, Some(2.5));
    assert_eq!(stored.draft.attachments.max_files, 3);

    // The old top-level shape, an unknown section and a bad value are refused, naming the
    // field, and change nothing.
    for (body, param) in [
        (json!({"execution": {"sync_timeout_ms": 1000}}), "execution"),
        (json!({"config": {"executions": {}}}), "config.executions"),
        (json!({"config": {"execution": {"sync_timeout_ms": 0}}}), "config.execution.sync_timeout_ms"),
        (json!({"config": {"attachments": {"max_files": "many"}}}), "config.attachments.max_files"),
    ] {
        let (status, answer) =
            send(app.client(&tenant.key, Method::PATCH, &format!("/agents/{id}")).json(&body)).await?;
        assert_error((status, &answer), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(answer["error"]["param"], param, "{body}");
    }
    let (_, answer) = send(app.client(&tenant.key, Method::POST, "/agents").json(&json!({
        "name": "old", "model": "m", "humanInTheLoop": {"questions_enabled": true},
    })))
    .await?;
    assert!(message(&answer).contains("config.humanInTheLoop"), "{answer}");
    assert_eq!(get(&app, &tenant, &format!("/agents/{id}")).await?["config"], expected);

    // A published version freezes the sections that travel with it.
    let (status, version) =
        send(app.client(&tenant.key, Method::POST, &format!("/agents/{id}/publish"))).await?;
    assert_eq!(status, StatusCode::CREATED, "{version}");
    assert_eq!(version["config"]["attachments"], expected["attachments"]);
    assert_eq!(version["config"]["humanInTheLoop"], expected["humanInTheLoop"]);
    Ok(())
}

#[tokio::test]
async fn a_background_turn_is_refused_where_the_agent_has_background_runs_off() -> R {
    let (model, app, tenant) = setup().await?;
    let agent = agent_with(&app, &tenant, "gpt-4o-mini").await?;
    send(app.client(&tenant.key, Method::POST, &format!("/agents/{agent}/publish"))).await?;
    let (_, session) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    let session = str_field(&session, "id")?;
    let body = json!({"agent": agent, "input": "hi", "background": true});
    for path in ["/responses".to_owned(), "/agents/responses".into(), format!("/sessions/{session}/messages")]
    {
        let (status, answer) = send(app.client(&tenant.key, Method::POST, &path).json(&body)).await?;
        assert_error((status, &answer), StatusCode::BAD_REQUEST, "background_not_enabled");
        assert_eq!(answer["error"]["param"], "background", "{path}: {answer}");
        assert!(message(&answer).contains("background_enabled"), "{answer}");
    }
    let (_, answer) =
        respond(&app, &tenant, json!({"agent": agent, "input": "hi", "background": "yes"})).await?;
    assert_eq!(answer["error"]["param"], "background", "{answer}");
    assert!(model.requests().is_empty(), "a refused turn reached the model");
    assert_eq!(session_ids(&app, &tenant).await?, vec![session.clone()], "a refused turn made a session");
    assert_eq!(get(&app, &tenant, &format!("/sessions/{session}")).await?["stop_reason"], Value::Null);

    // `background: false` is an ordinary synchronous turn.
    model.push(Reply::text("here"));
    let (status, answer) =
        respond(&app, &tenant, json!({"agent": agent, "input": "hi", "background": false})).await?;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["output_text"], "here");
    Ok(())
}

#[tokio::test]
async fn file_and_image_parts_are_refused_naming_the_attachments_setting() -> R {
    let (model, app, tenant) = setup().await?;
    let agent = agent_with(&app, &tenant, "gpt-4o-mini").await?;
    let (_, session) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    let session = str_field(&session, "id")?;
    let file = json!([{"role": "user", "content": [
        {"type": "input_text", "text": "read this"},
        {"type": "input_file", "file_id": "file_1"},
    ]}]);
    let image = json!([{"type": "input_image", "image_url": "https://example.com/a.png"}]);
    for (path, input, param) in [
        ("/responses".to_owned(), file.clone(), "input[0].content[1]"),
        ("/responses".to_owned(), image.clone(), "input[0]"),
        (format!("/sessions/{session}/messages"), image, "input[0]"),
    ] {
        let (status, answer) =
            send(app.client(&tenant.key, Method::POST, &path).json(&json!({"agent": agent, "input": input})))
                .await?;
        assert_error((status, &answer), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(answer["error"]["param"], param, "{answer}");
        assert!(message(&answer).contains("`config.attachments.enabled` is false"), "{answer}");
    }
    assert!(model.requests().is_empty(), "a refused turn reached the model");
    Ok(())
}

#[tokio::test]
async fn only_the_two_responses_routes_keep_the_legacy_error_shape() -> R {
    let (model, app, tenant) = setup().await?;
    let other = app.tenant().await?;
    let foreign = agent_with(&app, &other, "gpt-4o-mini").await?;
    let missing = uuid::Uuid::new_v4().to_string();

    // POST /responses and POST /agents/responses: `{"error": "message"}`.
    for path in ["/responses", "/agents/responses"] {
        let (status, body) =
            send(app.client(&tenant.key, Method::POST, path).json(&json!({"input": "hi"}))).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body["error"].is_string(), "{path}: {body}");
        for unknown in [&missing, &foreign] {
            let (status, body) = send(
                app.client(&tenant.key, Method::POST, path).json(&json!({"agent": unknown, "input": "hi"})),
            )
            .await?;
            assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
            assert!(body["error"].is_string(), "{path}: {body}");
        }
    }

    // POST /sessions/{id}/messages: the standard envelope, for the same mistakes.
    let (_, session) = send(app.client(&tenant.key, Method::POST, "/sessions")).await?;
    let messages = format!("/sessions/{}/messages", str_field(&session, "id")?);
    for unknown in [&missing, &foreign] {
        let (status, body) = send(
            app.client(&tenant.key, Method::POST, &messages).json(&json!({"agent": unknown, "input": "hi"})),
        )
        .await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "agent_not_found");
    }
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, &messages).json(&json!({"agent": 5, "input": "hi"})))
            .await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    assert_eq!(body["error"]["param"], "agent");
    // And another route that resolves an agent.
    let (status, body) = send(app.client(&tenant.key, Method::GET, &format!("/agents/{missing}"))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "agent_not_found");
    assert!(model.requests().is_empty());
    Ok(())
}

#[tokio::test]
async fn spend_on_a_model_without_a_price_is_recorded_as_unpriced() -> R {
    let (model, app, tenant) = setup().await?;
    let unpriced = agent_with(&app, &tenant, "my-own-model").await?;
    let priced = agent_with(&app, &tenant, "gpt-4o-mini").await?;
    model.push(Reply::text("first"));
    let (status, answer) = respond(&app, &tenant, json!({"agent": unpriced, "input": "hi"})).await?;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["usage"]["input_tokens"], 10);
    assert_eq!(answer["usage"]["unpriced_input_tokens"], 10);
    assert_eq!(answer["usage"]["unpriced_output_tokens"], 5);
    let session = str_field(&answer, "session_id")?;

    // A priced turn in the same session adds cost, and nothing unpriced.
    model.push(Reply::text("second"));
    let (status, answer) =
        respond(&app, &tenant, json!({"agent": priced, "input": "again", "session_id": session})).await?;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["usage"]["unpriced_input_tokens"], 0);

    let log = get(&app, &tenant, &format!("/sessions/{session}/events?limit=100")).await?;
    let usage: Vec<&Value> =
        log["data"].as_array().into_iter().flatten().filter(|e| e["type"] == "usage").collect();
    assert_eq!(usage.len(), 2, "{log}");
    assert_eq!(usage[0]["data"]["model"], "my-own-model");
    assert_eq!(usage[0]["data"]["priced"], false);
    assert_eq!(usage[1]["data"]["priced"], true);

    let read = get(&app, &tenant, &format!("/sessions/{session}")).await?;
    assert_eq!(read["usage"]["input_tokens"], 20, "{read}");
    assert_eq!(read["usage"]["unpriced_input_tokens"], 10);
    assert_eq!(read["usage"]["unpriced_output_tokens"], 5);
    let expected = 10.0 * 0.15 / 1e6 + 5.0 * 0.60 / 1e6;
    assert!((read["cost_usd"].as_f64().unwrap_or(-1.0) - expected).abs() < 1e-9, "{read}");
    let stored = app.store.sessions().get(&tenant.project_id.parse()?, &session.parse()?).await?;
    assert_eq!((stored.unpriced_input_tokens, stored.unpriced_output_tokens), (10, 5));
    Ok(())
}

/// Marks a session as held by a turn that never finished (its process died), with its hold
/// ending at `held_until_ms`.
async fn hold_session(app: &TestApp, tenant: &Tenant, session: &str, held_until_ms: i64) -> R {
    use aws_sdk_dynamodb::types::AttributeValue;
    app.store
        .dynamo
        .update_item()
        .table_name(&app.store.names.main_table)
        .key("PK", AttributeValue::S(format!("PROJECT#{}", tenant.project_id)))
        .key("SK", AttributeValue::S(format!("SESSION#{session}")))
        .update_expression("SET runtime_status = :r, current_turn_id = :t, turn_held_until = :h")
        .expression_attribute_values(":r", AttributeValue::S("running".into()))
        .expression_attribute_values(":t", AttributeValue::S("turn_dead".into()))
        .expression_attribute_values(":h", AttributeValue::N(held_until_ms.to_string()))
        .send()
        .await?;
    Ok(())
}

fn now_ms() -> anyhow::Result<i64> {
    Ok(i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis())?)
}

#[tokio::test]
async fn a_session_whose_turn_died_reads_idle_with_an_error() -> R {
    let (model, app, tenant) = setup().await?;
    let agent = agent_with(&app, &tenant, "gpt-4o-mini").await?;
    model.push(Reply::text("first"));
    let (_, first) = respond(&app, &tenant, json!({"agent": agent, "input": "one"})).await?;
    let session = str_field(&first, "session_id")?;
    let project: ProjectId = tenant.project_id.parse()?;
    let id: SessionId = session.parse()?;

    // A holder within its hold is running, in reads and lists alike.
    hold_session(&app, &tenant, &session, now_ms()? + 600_000).await?;
    let read = get(&app, &tenant, &format!("/sessions/{session}")).await?;
    assert_eq!(read["runtime_status"], "running", "{read}");
    assert_eq!(read["stop_reason"], "end_turn");

    // Past its hold (deadline and grace) the holder died: reads show the turn ended in error.
    hold_session(&app, &tenant, &session, now_ms()? - 1).await?;
    let read = get(&app, &tenant, &format!("/sessions/{session}")).await?;
    assert_eq!(read["runtime_status"], "idle", "{read}");
    assert_eq!(read["stop_reason"], "error");
    let list = get(&app, &tenant, "/sessions").await?;
    let listed = list["data"].as_array().and_then(|d| d.iter().find(|s| s["id"] == session.as_str()));
    assert_eq!(listed.map(|s| &s["runtime_status"]), Some(&json!("idle")), "{list}");
    assert_eq!(listed.map(|s| &s["stop_reason"]), Some(&json!("error")));
    // A read changes nothing stored …
    assert_eq!(app.store.sessions().get(&project, &id).await?.runtime_status, RuntimeStatus::Running);

    // … the next write records it.
    let (status, patched) = send(
        app.client(&tenant.key, Method::PATCH, &format!("/sessions/{session}")).json(&json!({"title": "t"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["runtime_status"], "idle");
    assert_eq!(patched["stop_reason"], "error");
    let stored = app.store.sessions().get(&project, &id).await?;
    assert_eq!((stored.runtime_status, stored.stop_reason), (RuntimeStatus::Idle, Some(StopReason::Error)));

    // And the session takes turns again.
    model.push(Reply::text("back"));
    let (status, answer) =
        respond(&app, &tenant, json!({"agent": agent, "input": "two", "session_id": session})).await?;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let read = get(&app, &tenant, &format!("/sessions/{session}")).await?;
    assert_eq!((&read["runtime_status"], &read["stop_reason"]), (&json!("idle"), &json!("end_turn")));
    Ok(())
}

#[tokio::test]
async fn a_session_can_name_only_an_agent_of_its_own_project() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let other = app.tenant().await?;
    let foreign = agent_with(&app, &other, "m").await?;
    for agent in [foreign, uuid::Uuid::new_v4().to_string()] {
        let (status, body) =
            send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent})))
                .await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "agent_not_found");
    }
    assert!(session_ids(&app, &tenant).await?.is_empty(), "a refused create stored a session");
    assert!(session_ids(&app, &other).await?.is_empty(), "the other project gained a session");

    let own = agent_with(&app, &tenant, "m").await?;
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": own}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["agent_id"], own.as_str());
    Ok(())
}
