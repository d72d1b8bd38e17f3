//! Agent turns end to end against a scripted model server: answers, tool calls, provider
//! failures, timeouts, limits, a busy session, draft vs published, usage and spend.

use std::time::{Duration, Instant};

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{MODEL_KEY, Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn setup() -> anyhow::Result<(ScriptedModel, TestApp, Tenant)> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    Ok((model, app, tenant))
}

async fn agent(app: &TestApp, tenant: &Tenant, extra: Value) -> anyhow::Result<String> {
    let mut body = json!({"name": "helper", "model": "gpt-4o-mini", "instructions": "Be brief.", "tools": ["add", "echo"]});
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    app.create_agent(&tenant.key, body).await
}

async fn respond(app: &TestApp, tenant: &Tenant, body: Value) -> anyhow::Result<(StatusCode, Value)> {
    send(app.client(&tenant.key, Method::POST, "/responses").json(&body)).await
}

async fn events(app: &TestApp, tenant: &Tenant, session: &str) -> anyhow::Result<Vec<Value>> {
    let (status, page) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/events?limit=100"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {page}");
    Ok(page["data"].as_array().cloned().unwrap_or_default())
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["type"].as_str()).collect()
}

#[tokio::test]
async fn a_turn_without_tools_answers_and_logs_every_step() -> R {
    let (model, app, tenant) = setup().await?;
    let agent = agent(&app, &tenant, json!({})).await?;
    model.push(Reply::text("Hello there"));
    let (status, body) =
        respond(&app, &tenant, json!({"agent": agent, "input": "hi", "metadata": {"ticket": "7"}})).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["stop_reason"], "completed");
    assert_eq!(body["output_text"], "Hello there");
    assert_eq!(body["output"][0]["content"][0]["text"], "Hello there");
    assert_eq!(body["usage"]["input_tokens"], 10);
    assert_eq!(body["usage"]["output_tokens"], 5);
    assert_eq!(body["usage"]["total_tokens"], 15);
    let session = str_field(&body, "session_id")?;
    assert_eq!(body["id"], format!("resp_{session}"));

    // The model saw the instructions and the message, with the provider key as bearer.
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["model"], "gpt-4o-mini");
    assert_eq!(requests[0]["messages"][0], json!({"role": "system", "content": "Be brief."}));
    assert_eq!(requests[0]["messages"][1], json!({"role": "user", "content": "hi"}));
    assert_eq!(model.authorizations()[0].as_deref(), Some(format!("Bearer {MODEL_KEY}").as_str()));

    let log = events(&app, &tenant, &session).await?;
    assert_eq!(types(&log), ["turn.started", "message.user", "usage", "message.assistant", "turn.ended"]);
    let seqs: Vec<u64> = log.iter().filter_map(|e| e["id"].as_u64()).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    assert_eq!(log[4]["data"]["stop_reason"], "end_turn");

    let (_, session_body) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}"))).await?;
    assert_eq!(session_body["runtime_status"], "idle");
    assert_eq!(session_body["stop_reason"], "end_turn");
    assert_eq!(session_body["metadata"], json!({"ticket": "7"}));
    assert_eq!(session_body["usage"]["total_tokens"], 15);
    // gpt-4o-mini: $0.15 / $0.60 per million tokens.
    let expected = 10.0 * 0.15 / 1e6 + 5.0 * 0.60 / 1e6;
    assert!((session_body["cost_usd"].as_f64().unwrap_or(-1.0) - expected).abs() < 1e-9, "{session_body}");
    Ok(())
}

#[tokio::test]
async fn tool_calls_run_and_their_results_go_back_to_the_model() -> R {
    let (model, app, tenant) = setup().await?;
    let agent = agent(&app, &tenant, json!({})).await?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    model.push(Reply::Tools {
        calls: vec![
            ("call_2".into(), "echo".into(), json!({"text": "x"}).to_string()),
            ("call_3".into(), "no_such_tool".into(), "{}".into()),
            ("call_4".into(), "current_time".into(), "{}".into()),
        ],
        text: Some("checking".into()),
        input: 20,
        output: 9,
    });
    model.push(Reply::text("The sum is 5"));
    let (status, body) = respond(&app, &tenant, json!({"agent": agent, "input": "add 2 and 3"})).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["output_text"], "The sum is 5");
    assert_eq!(body["usage"]["input_tokens"], 12 + 20 + 10);

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let second = requests[1]["messages"].as_array().cloned().unwrap_or_default();
    let tool_message = second.iter().find(|m| m["role"] == "tool").cloned().unwrap_or_default();
    assert_eq!(tool_message["tool_call_id"], "call_1");
    assert_eq!(
        serde_json::from_str::<Value>(tool_message["content"].as_str().unwrap_or(""))?,
        json!({"sum": 5.0})
    );
    assert_eq!(requests[0]["tools"].as_array().map(Vec::len), Some(2), "only the agent's tools are offered");
    let third = requests[2]["messages"].as_array().cloned().unwrap_or_default();
    let unknown = third.iter().find(|m| m["tool_call_id"] == "call_3").cloned().unwrap_or_default();
    assert!(unknown["content"].as_str().unwrap_or("").contains("unknown tool"), "{unknown}");
    // current_time exists but this agent was not given it: also an error result.
    let not_given = third.iter().find(|m| m["tool_call_id"] == "call_4").cloned().unwrap_or_default();
    assert!(not_given["content"].as_str().unwrap_or("").contains("unknown tool"), "{not_given}");

    let session = str_field(&body, "session_id")?;
    let log = events(&app, &tenant, &session).await?;
    assert_eq!(
        types(&log),
        [
            "turn.started",
            "message.user",
            "usage",
            "tool.call",
            "tool.result",
            "usage",
            "tool.call",
            "tool.call",
            "tool.call",
            "tool.result",
            "tool.result",
            "tool.result",
            "usage",
            "message.assistant",
            "turn.ended"
        ]
    );
    let result = log
        .iter()
        .find(|e| e["type"] == "tool.result" && e["data"]["call_id"] == "call_3")
        .cloned()
        .unwrap_or_default();
    assert_eq!(result["data"]["is_error"], true);
    let first = log.iter().find(|e| e["type"] == "tool.result").cloned().unwrap_or_default();
    assert_eq!(first["data"]["output"], json!({"sum": 5.0}));
    Ok(())
}

#[tokio::test]
async fn provider_failures_are_retried_with_backoff() -> R {
    let (model, app, tenant) = setup().await?;
    let agent = agent(&app, &tenant, json!({})).await?;
    model.push(Reply::Status(429));
    model.push(Reply::Status(503));
    model.push(Reply::text("made it"));
    let (status, body) = respond(&app, &tenant, json!({"agent": agent, "input": "hi"})).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "completed");
    assert_eq!(model.requests().len(), 3);
    // The harness's initial backoff is 20 ms, doubled after each failure: the retries wait at
    // least that long (lower bounds only: a busy machine makes the waits longer, never shorter).
    let arrivals = model.arrivals();
    let waits: Vec<Duration> = arrivals.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(waits[0] >= Duration::from_millis(20), "the first retry waited {waits:?}");
    assert!(waits[1] >= Duration::from_millis(40), "the second retry did not wait twice as long: {waits:?}");
    Ok(())
}

#[tokio::test]
async fn a_provider_that_fails_for_good_ends_the_turn_in_error_without_leaking_the_key() -> R {
    let (model, app, tenant) = setup().await?;
    let agent = agent(&app, &tenant, json!({})).await?;
    for _ in 0..3 {
        model.push(Reply::Status(500));
    }
    let (status, body) = respond(&app, &tenant, json!({"agent": agent, "input": "hi"})).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "incomplete");
    assert_eq!(body["stop_reason"], "error");
    assert_eq!(body["error"]["code"], "model_provider_error");
    assert_eq!(model.requests().len(), 3, "first attempt plus two retries");
    let session = str_field(&body, "session_id")?;
    let log = events(&app, &tenant, &session).await?;
    assert_eq!(types(&log), ["turn.started", "message.user", "error", "turn.ended"]);
    assert_eq!(log[3]["data"]["stop_reason"], "error");
    let (_, session_body) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}"))).await?;
    assert_eq!(session_body["runtime_status"], "idle");
    assert_eq!(session_body["stop_reason"], "error");
    let everything = format!("{body}{log:?}{session_body}");
    assert!(!everything.contains(MODEL_KEY), "the provider key leaked");

    // A 4xx other than 429 is not retried.
    model.push(Reply::Status(400));
    let (_, body) =
        respond(&app, &tenant, json!({"agent": agent, "input": "again", "session_id": session})).await?;
    assert_eq!(body["stop_reason"], "error");
    assert_eq!(model.requests().len(), 4);
    Ok(())
}

#[tokio::test]
async fn the_sync_timeout_ends_a_hung_turn_with_limit() -> R {
    let (model, app, tenant) = setup().await?;
    let agent = agent(&app, &tenant, json!({"config": {"execution": {"sync_timeout_ms": 1500}}})).await?;
    model.push(Reply::Hang(Duration::from_secs(6)));
    let started = Instant::now();
    let (status, body) = respond(&app, &tenant, json!({"agent": agent, "input": "hi"})).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(started.elapsed() < Duration::from_secs(5), "held {:?}", started.elapsed());
    assert_eq!(body["status"], "incomplete");
    assert_eq!(body["stop_reason"], "limit");
    let session = str_field(&body, "session_id")?;
    let (_, session_body) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}"))).await?;
    assert_eq!(session_body["runtime_status"], "idle");
    assert_eq!(session_body["stop_reason"], "limit");
    Ok(())
}

#[tokio::test]
async fn max_steps_ends_a_turn_that_keeps_calling_tools() -> R {
    let (model, app, tenant) = setup().await?;
    let agent = agent(&app, &tenant, json!({"max_steps": 2})).await?;
    model.push(Reply::tool("a", "echo", &json!({})));
    model.push(Reply::tool("b", "echo", &json!({})));
    model.push(Reply::text("never asked"));
    let (_, body) = respond(&app, &tenant, json!({"agent": agent, "input": "loop"})).await?;
    assert_eq!(body["status"], "incomplete");
    assert_eq!(body["stop_reason"], "limit");
    assert_eq!(model.requests().len(), 2);
    Ok(())
}

#[tokio::test]
async fn one_turn_at_a_time_per_session() -> R {
    let (model, app, tenant) = setup().await?;
    let agent = agent(&app, &tenant, json!({})).await?;
    model.push(Reply::text("first"));
    let (_, first) = respond(&app, &tenant, json!({"agent": agent, "input": "one"})).await?;
    let session = str_field(&first, "session_id")?;

    model.push(Reply::Hang(Duration::from_millis(1500)));
    let slow = {
        let request = app
            .client(&tenant.key, Method::POST, &format!("/sessions/{session}/messages"))
            .json(&json!({"input": "slow"}));
        tokio::spawn(send(request))
    };
    // Wait until the session is running, then try a second turn.
    let mut running = false;
    for _ in 0..50 {
        let (_, s) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}"))).await?;
        if s["runtime_status"] == "running" {
            running = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(running, "the slow turn never started");
    let (status, busy) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/messages"))
            .json(&json!({"input": "two"})),
    )
    .await?;
    assert_error((status, &busy), StatusCode::CONFLICT, "session_busy");
    assert_eq!(busy["error"]["session_id"], session.as_str());
    let (status, slow) = slow.await??;
    assert_eq!(status, StatusCode::OK, "{slow}");
    assert_eq!(slow["output_text"], "late");

    // Free again: the next turn runs, and sees the whole conversation.
    model.push(Reply::text("third"));
    let (status, third) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/messages"))
            .json(&json!({"input": "three"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{third}");
    let last = model.requests().last().cloned().unwrap_or_default();
    let roles: Vec<&str> = last["messages"]
        .as_array()
        .map(|m| m.iter().filter_map(|x| x["role"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(roles, ["system", "user", "assistant", "user", "assistant", "user"]);
    Ok(())
}

#[tokio::test]
async fn published_and_draft_run_different_configs() -> R {
    let (model, app, tenant) = setup().await?;
    let agent = agent(&app, &tenant, json!({"instructions": "v1"})).await?;
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/agents/responses")
            .json(&json!({"agent": agent, "input": "hi"})),
    )
    .await?;
    assert_error((status, &body), StatusCode::CONFLICT, "agent_not_published");

    let (status, v1) =
        send(app.client(&tenant.key, Method::POST, &format!("/agents/{agent}/publish"))).await?;
    assert_eq!(status, StatusCode::CREATED, "{v1}");
    assert_eq!(v1["version"], 1);
    let (status, _) = send(
        app.client(&tenant.key, Method::PATCH, &format!("/agents/{agent}"))
            .json(&json!({"instructions": "v2"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK);

    model.push(Reply::text("published"));
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/agents/responses")
            .json(&json!({"agent": agent, "input": "hi"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["agent"]["version"], 1);
    model.push(Reply::text("draft"));
    let (_, body) = respond(&app, &tenant, json!({"agent": agent, "input": "hi"})).await?;
    assert_eq!(body["agent"]["version"], Value::Null);
    let requests = model.requests();
    assert_eq!(requests[0]["messages"][0]["content"], "v1");
    assert_eq!(requests[1]["messages"][0]["content"], "v2");

    // Execution is read live: lowering the timeout needs no publish.
    let (_, agent_body) = send(
        app.client(&tenant.key, Method::PATCH, &format!("/agents/{agent}"))
            .json(&json!({"config": {"execution": {"sync_timeout_ms": 1000}}})),
    )
    .await?;
    assert_eq!(agent_body["config"]["execution"]["sync_timeout_ms"], 1000);
    // The model answers after 4 s; under the old 30 s limit the turn would end with its text.
    // `limit` is the rule (no wall-clock bound: a busy machine is slow, not wrong).
    model.push(Reply::Hang(Duration::from_secs(4)));
    let (_, body) = send(
        app.client(&tenant.key, Method::POST, "/agents/responses")
            .json(&json!({"agent": agent, "input": "hi"})),
    )
    .await?;
    assert_eq!(body["stop_reason"], "limit", "{body}");

    let (_, v2) = send(app.client(&tenant.key, Method::POST, &format!("/agents/{agent}/publish"))).await?;
    assert_eq!(v2["version"], 2);
    assert_eq!(v2["instructions"], "v2");
    let (_, versions) =
        send(app.client(&tenant.key, Method::GET, &format!("/agents/{agent}/versions"))).await?;
    let numbers: Vec<u64> = versions["data"]
        .as_array()
        .map(|d| d.iter().filter_map(|v| v["version"].as_u64()).collect())
        .unwrap_or_default();
    assert_eq!(numbers, [2, 1]);
    Ok(())
}

#[tokio::test]
async fn bad_responses_requests_are_refused_without_calling_the_model() -> R {
    let (model, app, tenant) = setup().await?;
    let other = app.tenant().await?;
    let agent = agent(&app, &tenant, json!({})).await?;
    let foreign_agent = app.create_agent(&other.key, json!({"name": "x", "model": "m"})).await?;

    let (status, body) = respond(&app, &tenant, json!({"input": "hi"})).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["error"].is_string(), "the older shape: {body}");
    for unknown in [uuid::Uuid::new_v4().to_string(), "nope".into(), foreign_agent.clone()] {
        let (status, body) = respond(&app, &tenant, json!({"agent": unknown, "input": "hi"})).await?;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert!(body["error"].is_string(), "{body}");
    }
    for input in [
        json!(null),
        json!(""),
        json!(7),
        json!([{"type": "input_image", "image_url": "x"}]),
        json!({"text": "x"}),
    ] {
        let (status, body) = respond(&app, &tenant, json!({"agent": agent, "input": input})).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    }
    let (status, body) =
        respond(&app, &tenant, json!({"agent": agent, "input": "hi", "metadata": [1]})).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    let (status, body) = send(app.client(&tenant.key, Method::POST, "/responses").body("{")).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_json");

    // Another project's session, a missing one, a malformed one.
    let (_, foreign_session) = send(app.client(&other.key, Method::POST, "/sessions")).await?;
    for session in [str_field(&foreign_session, "id")?, uuid::Uuid::new_v4().to_string(), "zzz".into()] {
        let (status, body) =
            respond(&app, &tenant, json!({"agent": agent, "input": "hi", "session_id": session})).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
        let (status, body) = send(
            app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/messages"))
                .json(&json!({"input": "hi"})),
        )
        .await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    }
    // A session without an agent needs one named.
    let (_, bare) = send(app.client(&tenant.key, Method::POST, "/sessions")).await?;
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{}/messages", str_field(&bare, "id")?))
            .json(&json!({"input": "hi"})),
    )
    .await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    assert!(model.requests().is_empty(), "a refused request reached the model");
    // And the other project's session stayed untouched.
    let (_, s) = send(app.client(
        &other.key,
        Method::GET,
        &format!("/sessions/{}", str_field(&foreign_session, "id")?),
    ))
    .await?;
    assert_eq!(s["runtime_status"], "idle");
    assert_eq!(s["stop_reason"], Value::Null);
    Ok(())
}

/// Marks a session as held by a turn that never finished (its process died).
async fn hold_session(
    app: &TestApp,
    tenant: &Tenant,
    session: &str,
    held_until_ms: i64,
) -> anyhow::Result<()> {
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

#[tokio::test]
async fn a_session_held_by_a_dead_turn_is_taken_over_once_its_hold_expires() -> R {
    let (model, app, tenant) = setup().await?;
    let agent = agent(&app, &tenant, json!({})).await?;
    model.push(Reply::text("first"));
    let (_, first) = respond(&app, &tenant, json!({"agent": agent, "input": "one"})).await?;
    let session = str_field(&first, "session_id")?;
    let now_ms =
        i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis())?;

    // A holder still within its hold: busy.
    hold_session(&app, &tenant, &session, now_ms + 600_000).await?;
    let (status, body) =
        respond(&app, &tenant, json!({"agent": agent, "input": "two", "session_id": session})).await?;
    assert_error((status, &body), StatusCode::CONFLICT, "session_busy");

    // A holder past its hold died: the next turn takes the session over and releases it.
    hold_session(&app, &tenant, &session, now_ms - 1).await?;
    model.push(Reply::text("recovered"));
    let (status, body) =
        respond(&app, &tenant, json!({"agent": agent, "input": "three", "session_id": session})).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["output_text"], "recovered");
    let (_, s) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}"))).await?;
    assert_eq!(s["runtime_status"], "idle");
    Ok(())
}
