//! Turns that pause and carry on, end to end over HTTP: a tool that needs approval, a question
//! (`ask_user`) and a client tool pause the turn (`requires_action`); answering through the
//! actions routes sends a continuation through the real `runs` queue, and the in-process
//! `run-execution` consumer carries the same turn on. Expiry through the retention sweep,
//! cancel of a paused turn, `actions_pending`, and duplicate deliveries.

use std::time::{Duration, Instant};

use agentplane_domain::action::{ActionId, Continuation};
use agentplane_domain::{ProjectId, SessionId};
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn setup(hitl: Value) -> anyhow::Result<(ScriptedModel, TestApp, Tenant, String)> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({
                "name": "careful", "model": "gpt-4o-mini", "instructions": "Be brief.",
                "tools": ["add", "echo"], "config": {"humanInTheLoop": hitl},
            }),
        )
        .await?;
    Ok((model, app, tenant, agent))
}

async fn events(app: &TestApp, tenant: &Tenant, session: &str) -> anyhow::Result<Vec<Value>> {
    let (status, page) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/events?limit=100"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {page}");
    Ok(page["data"].as_array().cloned().unwrap_or_default())
}

fn types(events: &[Value]) -> Vec<String> {
    events.iter().filter_map(|e| e["type"].as_str().map(str::to_owned)).collect()
}

async fn session(app: &TestApp, tenant: &Tenant, id: &str) -> anyhow::Result<Value> {
    let (status, body) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{id}"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    Ok(body)
}

/// Waits until the session's log holds `count` `turn.ended` events; returns the log.
async fn until_ended(app: &TestApp, tenant: &Tenant, id: &str, count: usize) -> anyhow::Result<Vec<Value>> {
    let started = Instant::now();
    loop {
        let log = events(app, tenant, id).await?;
        if types(&log).iter().filter(|t| *t == "turn.ended").count() >= count {
            return Ok(log);
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(30),
            "the turn did not carry on: {:?}",
            types(&log)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn answer(
    app: &TestApp,
    tenant: &Tenant,
    session: &str,
    action: &str,
    body: Value,
) -> anyhow::Result<(StatusCode, Value)> {
    send(app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/actions/{action}")).json(&body))
        .await
}

/// Starts a turn that pauses; returns the Responses answer.
async fn paused_turn(app: &TestApp, tenant: &Tenant, agent: &str) -> anyhow::Result<Value> {
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "input": "add 2 and 3"})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    Ok(body)
}

#[tokio::test]
async fn an_approved_tool_carries_the_same_turn_on_through_the_runs_queue() -> R {
    let (model, app, tenant, agent) = setup(json!({"tool_approvals": ["add"]})).await?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    model.push(Reply::text("it is 5"));
    let paused = paused_turn(&app, &tenant, &agent).await?;
    assert_eq!(paused["status"], "requires_action", "{paused}");
    assert_eq!(paused["stop_reason"], "requires_action");
    assert_eq!(paused["output_text"], "");
    let actions = paused["required_action"]["actions"].as_array().cloned().unwrap_or_default();
    assert_eq!(paused["required_action"]["type"], "actions");
    assert_eq!(actions.len(), 1, "{paused}");
    let action = &actions[0];
    let action_id = str_field(action, "id")?;
    assert!(action_id.parse::<ActionId>().is_ok(), "{action_id}");
    assert_eq!((action["type"].clone(), action["tool"].clone()), (json!("approval"), json!("add")));
    assert_eq!(action["args"], json!({"a": 2, "b": 3}));
    // The default wait: a day.
    let expires = action["expires_at"].as_i64().unwrap_or_default();
    let created = paused["created_at"].as_i64().unwrap_or_default();
    assert!((86_390..=86_410).contains(&(expires - created)), "{expires} - {created}");
    let session_id = str_field(&paused, "session_id")?;

    // Paused: the session says so, the log says why, and nothing ran.
    assert_eq!(session(&app, &tenant, &session_id).await?["runtime_status"], "requires_action");
    let log = events(&app, &tenant, &session_id).await?;
    assert_eq!(types(&log), ["turn.started", "message.user", "usage", "tool.call", "action.required"]);
    assert_eq!(log[4]["data"]["action_id"], action_id.as_str());
    assert_eq!(model.requests().len(), 1);

    // A new message waits for the action.
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{session_id}/messages"))
            .json(&json!({"input": "hello?"})),
    )
    .await?;
    assert_error((status, &body), StatusCode::CONFLICT, "actions_pending");
    assert_eq!(body["error"]["pending_action_ids"], json!([action_id]));
    assert_eq!(model.requests().len(), 1);

    // The answer returns at once; the turn carries on by itself.
    let (status, answered) =
        answer(&app, &tenant, &session_id, &action_id, json!({"decision": "approve"})).await?;
    assert_eq!(status, StatusCode::OK, "{answered}");
    assert_eq!(answered["status"], "resolved");
    let log = until_ended(&app, &tenant, &session_id, 1).await?;
    assert_eq!(
        types(&log),
        [
            "turn.started",
            "message.user",
            "usage",
            "tool.call",
            "action.required",
            "tool.result",
            "usage",
            "message.assistant",
            "turn.ended"
        ]
    );
    // One turn throughout.
    let turn = log[0]["turn_id"].clone();
    assert!(log.iter().all(|e| e["turn_id"] == turn), "{log:?}");
    assert_eq!(log[5]["data"]["output"], json!({"sum": 5.0}));
    assert_eq!(log[8]["data"]["stop_reason"], "end_turn");
    assert_eq!(log[8]["data"]["usage"]["total_tokens"], 19 + 15);
    // The model saw the call and its result.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1]["messages"].as_array().cloned().unwrap_or_default();
    let tool = messages.iter().find(|m| m["role"] == "tool").cloned().unwrap_or_default();
    assert_eq!(
        (tool["tool_call_id"].clone(), tool["content"].clone()),
        (json!("call_1"), json!("{\"sum\":5.0}"))
    );
    let done = session(&app, &tenant, &session_id).await?;
    assert_eq!(
        (done["runtime_status"].clone(), done["stop_reason"].clone()),
        (json!("idle"), json!("end_turn"))
    );

    // The session takes new messages again.
    model.push(Reply::text("hi"));
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{session_id}/messages"))
            .json(&json!({"input": "thanks"})),
    )
    .await?;
    assert_eq!((status, body["status"].clone()), (StatusCode::OK, json!("completed")), "{body}");
    Ok(())
}

#[tokio::test]
async fn a_denied_tool_never_runs_and_the_model_sees_the_reason() -> R {
    let (model, app, tenant, agent) = setup(json!({"tool_approvals": ["add"]})).await?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    model.push(Reply::text("understood"));
    let paused = paused_turn(&app, &tenant, &agent).await?;
    let session_id = str_field(&paused, "session_id")?;
    let action_id = str_field(&paused["required_action"]["actions"][0], "id")?;
    let (status, _) =
        answer(&app, &tenant, &session_id, &action_id, json!({"decision": "deny", "reason": "not today"}))
            .await?;
    assert_eq!(status, StatusCode::OK);
    let log = until_ended(&app, &tenant, &session_id, 1).await?;
    let result = log.iter().find(|e| e["type"] == "tool.result").cloned().unwrap_or_default();
    assert_eq!(result["data"]["is_error"], true);
    assert_eq!(result["data"]["output"], json!({"denied": true, "reason": "not today"}));
    let messages = model.requests()[1]["messages"].as_array().cloned().unwrap_or_default();
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "tool" && m["content"].as_str().is_some_and(|c| c.contains("not today")))
    );
    Ok(())
}

#[tokio::test]
async fn a_question_and_a_client_tool_wait_for_both_answers_which_reach_the_model_unchanged() -> R {
    let hitl = json!({
        "questions_enabled": true,
        "client_tools": [{"name": "pick_color", "description": "The user picks a color.",
                          "parameters": {"type": "object", "properties": {"Palette": {"type": "array"}}}}],
    });
    let (model, app, tenant, agent) = setup(hitl).await?;
    model.push(Reply::Tools {
        calls: vec![
            ("call_q".into(), "ask_user".into(), json!({"question": "Which city?"}).to_string()),
            ("call_c".into(), "pick_color".into(), json!({"Palette": ["red", "blue"]}).to_string()),
        ],
        text: Some("Let me ask.".into()),
        input: 12,
        output: 7,
    });
    model.push(Reply::text("Paris in red"));
    let paused = paused_turn(&app, &tenant, &agent).await?;
    // The model was offered ask_user and the client tool.
    let offered: Vec<Value> = model.requests()[0]["tools"]
        .as_array()
        .map(|t| t.iter().map(|t| t["function"]["name"].clone()).collect())
        .unwrap_or_default();
    assert!(offered.contains(&json!("ask_user")) && offered.contains(&json!("pick_color")), "{offered:?}");
    let session_id = str_field(&paused, "session_id")?;
    let actions = paused["required_action"]["actions"].as_array().cloned().unwrap_or_default();
    let by_type = |kind: &str| actions.iter().find(|a| a["type"] == kind).cloned().unwrap_or_default();
    let (question, client) = (by_type("question"), by_type("client_tool"));
    assert_eq!(question["question"], "Which city?");
    assert_eq!(question["tool"], "ask_user");
    assert_eq!(client["args"], json!({"Palette": ["red", "blue"]}));

    let answers = json!({"City Name": "Paris", "camelCase": [true, null]});
    let (status, _) =
        answer(&app, &tenant, &session_id, &str_field(&question, "id")?, json!({"answers": answers.clone()}))
            .await?;
    assert_eq!(status, StatusCode::OK);
    // One of two answered: still paused, no model call.
    app.drained().await?;
    assert_eq!(session(&app, &tenant, &session_id).await?["runtime_status"], "requires_action");
    assert_eq!(model.requests().len(), 1);
    let (status, _) = answer(
        &app,
        &tenant,
        &session_id,
        &str_field(&client, "id")?,
        json!({"output": {"Chosen Color": "red"}}),
    )
    .await?;
    assert_eq!(status, StatusCode::OK);
    until_ended(&app, &tenant, &session_id, 1).await?;
    let messages = model.requests()[1]["messages"].as_array().cloned().unwrap_or_default();
    let tool = |id: &str| {
        messages
            .iter()
            .find(|m| m["tool_call_id"] == id)
            .and_then(|m| m["content"].as_str())
            .and_then(|c| serde_json::from_str::<Value>(c).ok())
    };
    assert_eq!(tool("call_q"), Some(json!({"answers": answers})));
    assert_eq!(tool("call_c"), Some(json!({"Chosen Color": "red"})));
    Ok(())
}

#[tokio::test]
async fn an_unanswered_action_expires_through_the_sweep_and_the_turn_carries_on() -> R {
    let (model, app, tenant, agent) =
        setup(json!({"tool_approvals": ["add"], "approval_timeout_minutes": 1})).await?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    model.push(Reply::text("nobody answered"));
    let paused = paused_turn(&app, &tenant, &agent).await?;
    let session_id = str_field(&paused, "session_id")?;
    let action_id = str_field(&paused["required_action"]["actions"][0], "id")?;
    // Not due yet: the sweep leaves it.
    assert_eq!(app.sweep().await?.expired, 0);
    // A minute later it is due.
    let later = agentplane_api::edge::now().plus_millis(61_000);
    let report = agentplane_api::jobs::sweep_once(&app.app.store, later).await?;
    assert_eq!((report.expired, report.continued), (1, 1), "{report:?}");
    let log = until_ended(&app, &tenant, &session_id, 1).await?;
    let result = log.iter().find(|e| e["type"] == "tool.result").cloned().unwrap_or_default();
    assert_eq!(result["data"]["output"]["expired"], true);
    assert_eq!(log.last().map(|e| e["data"]["stop_reason"].clone()), Some(json!("end_turn")));
    let (status, body) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session_id}/actions/{action_id}")))
            .await?;
    assert_eq!((status, body["status"].clone()), (StatusCode::OK, json!("expired")));
    // A late answer is refused with the status.
    let (status, body) =
        answer(&app, &tenant, &session_id, &action_id, json!({"decision": "approve"})).await?;
    assert_error((status, &body), StatusCode::CONFLICT, "action_not_pending");
    assert_eq!(body["error"]["action_status"], "expired");
    assert_eq!(model.requests().len(), 2);
    Ok(())
}

#[tokio::test]
async fn cancelling_a_paused_turn_cancels_its_actions_and_frees_the_session() -> R {
    let (model, app, tenant, agent) = setup(json!({"tool_approvals": ["add"]})).await?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    let paused = paused_turn(&app, &tenant, &agent).await?;
    let session_id = str_field(&paused, "session_id")?;
    let action_id = str_field(&paused["required_action"]["actions"][0], "id")?;
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, &format!("/sessions/{session_id}/cancel"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (body["runtime_status"].clone(), body["stop_reason"].clone()),
        (json!("idle"), json!("cancelled"))
    );
    let (_, action) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session_id}/actions/{action_id}")))
            .await?;
    assert_eq!(action["status"], "cancelled");
    let log = events(&app, &tenant, &session_id).await?;
    assert_eq!(log.last().map(|e| e["data"]["stop_reason"].clone()), Some(json!("cancelled")));
    // Answering now is too late, and carries nothing on.
    let (status, body) =
        answer(&app, &tenant, &session_id, &action_id, json!({"decision": "approve"})).await?;
    assert_error((status, &body), StatusCode::CONFLICT, "action_not_pending");
    assert_eq!(body["error"]["action_status"], "cancelled");
    // Cancelling again: nothing to cancel.
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, &format!("/sessions/{session_id}/cancel"))).await?;
    assert_error((status, &body), StatusCode::CONFLICT, "nothing_to_cancel");
    // The session takes a new message.
    model.push(Reply::text("fresh start"));
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{session_id}/messages"))
            .json(&json!({"input": "again"})),
    )
    .await?;
    assert_eq!((status, body["status"].clone()), (StatusCode::OK, json!("completed")), "{body}");
    assert_eq!(model.requests().len(), 2);
    Ok(())
}

#[tokio::test]
async fn the_same_continuation_delivered_twenty_times_carries_the_turn_on_once() -> R {
    let (model, app, tenant, agent) = setup(json!({"tool_approvals": ["add"]})).await?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    model.push(Reply::text("once"));
    // Anything further would show as a second carry-on.
    for _ in 0..5 {
        model.push(Reply::text("twice"));
    }
    let paused = paused_turn(&app, &tenant, &agent).await?;
    let session_id = str_field(&paused, "session_id")?;
    let action_id = str_field(&paused["required_action"]["actions"][0], "id")?;
    let project: ProjectId = tenant.project_id.parse()?;
    let sid: SessionId = session_id.parse()?;
    let stored = app.store.actions().get(&project, &sid, &action_id.parse()?).await?;
    let continuation = Continuation {
        project_id: project,
        session_id: sid,
        turn_id: stored.turn_id.clone(),
        version: stored.pause_version,
    };
    let (status, _) = answer(&app, &tenant, &session_id, &action_id, json!({"decision": "approve"})).await?;
    assert_eq!(status, StatusCode::OK);
    // Twenty more deliveries of the same continuation, at once, on the real queue.
    let queue = app.store.runs_queue()?;
    let sends = (0..20).map(|_| queue.send(&continuation));
    for sent in futures_util::future::join_all(sends).await {
        sent?;
    }
    until_ended(&app, &tenant, &session_id, 1).await?;
    // Every delivery handled: the queue holds none of them any more.
    app.drained().await?;
    let log = events(&app, &tenant, &session_id).await?;
    assert_eq!(model.requests().len(), 2, "one model call after the pause");
    let count = |kind: &str| types(&log).iter().filter(|t| *t == kind).count();
    assert_eq!(
        (count("turn.ended"), count("tool.result"), count("message.assistant")),
        (1, 1, 1),
        "{:?}",
        types(&log)
    );
    assert_eq!(session(&app, &tenant, &session_id).await?["runtime_status"], "idle");
    Ok(())
}

#[tokio::test]
async fn another_projects_key_cannot_answer_or_cancel_a_paused_turn() -> R {
    let (model, app, tenant, agent) = setup(json!({"tool_approvals": ["add"]})).await?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    let paused = paused_turn(&app, &tenant, &agent).await?;
    let session_id = str_field(&paused, "session_id")?;
    let action_id = str_field(&paused["required_action"]["actions"][0], "id")?;
    let other = app.tenant().await?;
    let (status, body) =
        answer(&app, &other, &session_id, &action_id, json!({"decision": "approve"})).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    let (status, body) =
        send(app.client(&other.key, Method::POST, &format!("/sessions/{session_id}/cancel"))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    app.drained().await?;
    assert_eq!(session(&app, &tenant, &session_id).await?["runtime_status"], "requires_action");
    assert_eq!(model.requests().len(), 1);
    Ok(())
}

#[tokio::test]
async fn client_tools_are_validated_on_the_agent() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    for (tools, param) in [
        (json!([{"name": "ask_user"}]), "config.humanInTheLoop.client_tools[0].name"),
        (json!([{"name": "bad name!"}]), "config.humanInTheLoop.client_tools[0].name"),
        (json!([{"name": "a"}, {"name": "a"}]), "config.humanInTheLoop.client_tools[1].name"),
        (json!([{"name": "a", "parameters": "nope"}]), "config.humanInTheLoop.client_tools[0].parameters"),
    ] {
        let body = json!({"name": "x", "model": "m", "config": {"humanInTheLoop": {"client_tools": tools}}});
        let (status, answer) = send(app.client(&tenant.key, Method::POST, "/agents").json(&body)).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{tools}: {answer}");
        assert_eq!(answer["error"]["param"], param, "{answer}");
    }
    Ok(())
}

#[tokio::test]
async fn a_continuation_that_could_not_be_sent_is_sent_again_by_the_sweep() -> R {
    let (model, app, tenant, agent) = setup(json!({"tool_approvals": ["add"]})).await?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    model.push(Reply::text("late but done"));
    let paused = paused_turn(&app, &tenant, &agent).await?;
    let session_id = str_field(&paused, "session_id")?;
    let action_id = str_field(&paused["required_action"]["actions"][0], "id")?;
    let project: ProjectId = tenant.project_id.parse()?;
    let sid: SessionId = session_id.parse()?;
    // Answered, but the send of its continuation never happened (as when the queue failed).
    let action = app.store.actions().get(&project, &sid, &action_id.parse()?).await?;
    let approve = agentplane_domain::action::Answer::Approval {
        decision: agentplane_domain::action::Decision::Approve,
        reason: None,
    };
    let now = agentplane_api::edge::now();
    app.store
        .actions()
        .settle(&action, agentplane_domain::action::ActionStatus::Resolved, Some(approve), now)
        .await?;
    app.drained().await?;
    assert_eq!(session(&app, &tenant, &session_id).await?["runtime_status"], "requires_action");
    // Within the minute the answerer has, the sweep leaves it; after it, the sweep sends it.
    assert_eq!(app.sweep().await?.resent, 0);
    let report = agentplane_api::jobs::sweep_once(&app.app.store, now.plus_millis(61_000)).await?;
    assert_eq!(report.resent, 1, "{report:?}");
    let log = until_ended(&app, &tenant, &session_id, 1).await?;
    assert_eq!(log.last().map(|e| e["data"]["stop_reason"].clone()), Some(json!("end_turn")));
    // Sent once: the next pass finds nothing waiting.
    let report = agentplane_api::jobs::sweep_once(&app.app.store, now.plus_millis(120_000)).await?;
    assert_eq!(report.resent, 0, "{report:?}");
    assert_eq!(model.requests().len(), 2);
    Ok(())
}
