//! An agent over A2A (JSON-RPC 2.0), end to end over HTTP against the scripted model: the card,
//! a task per turn, `input-required` answered by the caller's next message (the same turn
//! carries on), `message/stream` frames, cancel, the protocol's error objects, and another
//! project's task not found.

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn published(app: &TestApp, tenant: &Tenant, body: Value) -> anyhow::Result<String> {
    let agent = app.create_agent(&tenant.key, body).await?;
    let (status, published) =
        send(app.client(&tenant.key, Method::POST, &format!("/agents/{agent}/publish"))).await?;
    anyhow::ensure!(status.is_success(), "publish: {status} {published}");
    Ok(agent)
}

async fn setup(hitl: Value) -> anyhow::Result<(ScriptedModel, TestApp, Tenant, String)> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = published(
        &app,
        &tenant,
        json!({"name": "Helper", "model": "gpt-4o-mini", "tools": ["add"], "config": {"humanInTheLoop": hitl}}),
    )
    .await?;
    Ok((model, app, tenant, agent))
}

/// One JSON-RPC call: the HTTP status and the answer.
async fn call(
    app: &TestApp,
    key: &str,
    agent: &str,
    method: &str,
    params: Value,
) -> anyhow::Result<(StatusCode, Value)> {
    send(
        app.client(key, Method::POST, &format!("/agents/{agent}/a2a"))
            .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})),
    )
    .await
}

fn user_message(text: &str, context: Option<&str>) -> Value {
    let mut message = json!({"role": "user", "messageId": uuid::Uuid::new_v4().to_string(),
                             "parts": [{"kind": "text", "text": text}], "kind": "message"});
    if let Some(context) = context {
        message["contextId"] = json!(context);
    }
    json!({"message": message})
}

/// The result of a call that must succeed.
fn result(answer: &(StatusCode, Value)) -> anyhow::Result<Value> {
    anyhow::ensure!(answer.0 == StatusCode::OK && answer.1["error"].is_null(), "{answer:?}");
    assert_eq!((answer.1["jsonrpc"].as_str(), answer.1["id"].as_i64()), (Some("2.0"), Some(7)));
    Ok(answer.1["result"].clone())
}

fn error_code(answer: &(StatusCode, Value)) -> Option<i64> {
    assert_eq!(answer.0, StatusCode::OK, "{answer:?}");
    answer.1["error"]["code"].as_i64()
}

#[tokio::test]
async fn the_card_names_the_agent_and_its_endpoint() -> R {
    let (_model, app, tenant, agent) = setup(json!({})).await?;
    let (status, card) = send(app.client(
        &tenant.key,
        Method::GET,
        &format!("/agents/{agent}/a2a/.well-known/agent-card.json"),
    ))
    .await?;
    assert_eq!(status, StatusCode::OK, "{card}");
    assert_eq!(card["name"], "Helper");
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(card["preferredTransport"], "JSONRPC");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["version"], "1");
    assert!(str_field(&card, "url")?.ends_with(&format!("/api/client/v1/agents/{agent}/a2a")), "{card}");

    // An unpublished agent has no card; another project's agent is not found.
    let draft = app.create_agent(&tenant.key, json!({"name": "draft", "model": "gpt-4o-mini"})).await?;
    let path = format!("/agents/{draft}/a2a/.well-known/agent-card.json");
    let answer = send(app.client(&tenant.key, Method::GET, &path)).await?;
    assert_error((answer.0, &answer.1), StatusCode::CONFLICT, "agent_not_published");
    let other = app.tenant().await?;
    let path = format!("/agents/{agent}/a2a/.well-known/agent-card.json");
    let answer = send(app.client(&other.key, Method::GET, &path)).await?;
    assert_error((answer.0, &answer.1), StatusCode::NOT_FOUND, "agent_not_found");
    let answer = call(&app, &other.key, &agent, "tasks/get", json!({"id": "x"})).await?;
    assert_error((answer.0, &answer.1), StatusCode::NOT_FOUND, "agent_not_found");
    Ok(())
}

#[tokio::test]
async fn a_message_is_a_task_per_turn_in_a_context_that_is_the_session() -> R {
    let (model, app, tenant, agent) = setup(json!({})).await?;
    model.push(Reply::text("Hello there"));
    let task = result(&call(&app, &tenant.key, &agent, "message/send", user_message("hi", None)).await?)?;
    assert_eq!(task["kind"], "task");
    assert_eq!(task["status"]["state"], "completed", "{task}");
    assert_eq!(task["artifacts"][0]["parts"][0], json!({"kind": "text", "text": "Hello there"}));
    let roles: Vec<&str> = task["history"]
        .as_array()
        .map(|h| h.iter().filter_map(|m| m["role"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(roles, ["user", "agent"]);
    let (id, context) = (str_field(&task, "id")?, str_field(&task, "contextId")?);

    // The context is the session: the published version ran there, and the log holds the turn.
    let (status, session) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{context}"))).await?;
    assert_eq!(status, StatusCode::OK, "{session}");
    assert_eq!(session["agent_id"], agent);

    // tasks/get reads the same task; historyLength keeps the last messages.
    let got =
        result(&call(&app, &tenant.key, &agent, "tasks/get", json!({"id": id, "historyLength": 1})).await?)?;
    assert_eq!((&got["id"], &got["status"]["state"]), (&json!(id), &json!("completed")));
    assert_eq!(got["history"].as_array().map(Vec::len), Some(1));
    assert_eq!(got["history"][0]["role"], "agent");

    // A second message in the context is a second task; the model saw the first exchange.
    model.push(Reply::text("Again"));
    let second = result(
        &call(&app, &tenant.key, &agent, "message/send", user_message("more", Some(&context))).await?,
    )?;
    assert_eq!(second["contextId"], json!(context));
    assert_ne!(second["id"], json!(id));
    let sent = model.requests();
    let last = sent.last().map(|r| r["messages"].to_string()).unwrap_or_default();
    assert!(last.contains("Hello there") && last.contains("more"), "{last}");

    // Another project's task is not found, even through its own published agent.
    let other = app.tenant().await?;
    let theirs = published(&app, &other, json!({"name": "other", "model": "gpt-4o-mini"})).await?;
    let answer = call(&app, &other.key, &theirs, "tasks/get", json!({"id": id})).await?;
    assert_eq!(error_code(&answer), Some(-32001), "{answer:?}");
    let answer = call(&app, &other.key, &theirs, "message/send", user_message("in", Some(&context))).await?;
    assert_eq!(error_code(&answer), Some(-32602), "{answer:?}");
    let answer = call(&app, &other.key, &theirs, "tasks/cancel", json!({"id": id})).await?;
    assert_eq!(error_code(&answer), Some(-32001), "{answer:?}");
    // Nothing ran for them.
    assert_eq!(model.requests().len(), 2);
    Ok(())
}

#[tokio::test]
async fn an_approval_is_input_required_and_the_next_message_answers_it_in_the_same_turn() -> R {
    let (model, app, tenant, agent) = setup(json!({"tool_approvals": ["add"]})).await?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    model.push(Reply::text("It is 5"));
    let task = result(&call(&app, &tenant.key, &agent, "message/send", user_message("2+3?", None)).await?)?;
    assert_eq!(task["status"]["state"], "input-required", "{task}");
    let waiting = &task["status"]["message"];
    assert_eq!(waiting["role"], "agent");
    assert!(waiting["parts"][0]["text"].as_str().unwrap_or_default().contains("add"), "{waiting}");
    let action = waiting["parts"][1]["data"]["actions"][0].clone();
    assert_eq!((&action["type"], &action["tool"]), (&json!("approval"), &json!("add")));
    let (id, context) = (str_field(&task, "id")?, str_field(&task, "contextId")?);

    // A word that is no decision is refused, and nothing is answered.
    let answer =
        call(&app, &tenant.key, &agent, "message/send", user_message("perhaps", Some(&context))).await?;
    assert_eq!(error_code(&answer), Some(-32602), "{answer:?}");

    // "yes" approves: the same task carries on to its end in this call.
    let done =
        result(&call(&app, &tenant.key, &agent, "message/send", user_message("Yes", Some(&context))).await?)?;
    assert_eq!((&done["id"], &done["status"]["state"]), (&json!(id), &json!("completed")), "{done}");
    assert_eq!(done["artifacts"][0]["parts"][0]["text"], "It is 5");
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1]["messages"].to_string().contains('5'), "the tool ran: {}", requests[1]["messages"]);
    let (_, action) = send(app.client(
        &tenant.key,
        Method::GET,
        &format!("/sessions/{context}/actions/{}", str_field(&action, "id")?),
    ))
    .await?;
    assert_eq!(action["status"], "resolved");
    // One turn in the log.
    let (_, log) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{context}/events?limit=100"))).await?;
    let kinds: Vec<&str> = log["data"]
        .as_array()
        .map(|d| d.iter().filter_map(|e| e["type"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(kinds.iter().filter(|k| **k == "turn.started").count(), 1, "{kinds:?}");

    // The task has ended: a message naming it is refused; so is a cancel.
    let mut again = user_message("more", Some(&context));
    again["message"]["taskId"] = json!(id);
    let answer = call(&app, &tenant.key, &agent, "message/send", again).await?;
    assert_eq!(error_code(&answer), Some(-32004), "{answer:?}");
    let answer = call(&app, &tenant.key, &agent, "tasks/cancel", json!({"id": id})).await?;
    assert_eq!(error_code(&answer), Some(-32002), "{answer:?}");
    assert_eq!(answer.1["error"]["data"]["state"], "completed");
    Ok(())
}

#[tokio::test]
async fn a_question_is_answered_by_the_text_and_a_waiting_task_can_be_cancelled() -> R {
    let (model, app, tenant, agent) = setup(json!({"questions_enabled": true})).await?;
    model.push(Reply::tool("call_q", "ask_user", &json!({"question": "Which city?"})));
    model.push(Reply::text("Paris it is"));
    let task =
        result(&call(&app, &tenant.key, &agent, "message/send", user_message("plan a trip", None)).await?)?;
    assert_eq!(task["status"]["state"], "input-required", "{task}");
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "Which city?");
    let (id, context) = (str_field(&task, "id")?, str_field(&task, "contextId")?);
    let mut reply = user_message("Paris", Some(&context));
    reply["message"]["taskId"] = json!(id);
    let done = result(&call(&app, &tenant.key, &agent, "message/send", reply).await?)?;
    assert_eq!(done["status"]["state"], "completed", "{done}");
    let requests = model.requests();
    assert!(requests[1]["messages"].to_string().contains("Paris"), "{}", requests[1]["messages"]);

    // Another question, cancelled while it waits: the task is canceled, the session idle.
    model.push(Reply::tool("call_r", "ask_user", &json!({"question": "When?"})));
    let waiting = result(
        &call(&app, &tenant.key, &agent, "message/send", user_message("and then?", Some(&context))).await?,
    )?;
    assert_eq!(waiting["status"]["state"], "input-required");
    let cancelled =
        result(&call(&app, &tenant.key, &agent, "tasks/cancel", json!({"id": waiting["id"]})).await?)?;
    assert_eq!(cancelled["status"]["state"], "canceled", "{cancelled}");
    let (_, session) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{context}"))).await?;
    assert_eq!(session["runtime_status"], "idle");
    Ok(())
}

#[tokio::test]
async fn message_stream_sends_the_task_its_answer_and_its_final_status() -> R {
    let (model, app, tenant, agent) = setup(json!({})).await?;
    model.push(Reply::text("Streamed answer"));
    let response = app
        .client(&tenant.key, Method::POST, &format!("/agents/{agent}/a2a"))
        .json(&json!({"jsonrpc": "2.0", "id": "s1", "method": "message/stream", "params": user_message("hi", None)}))
        .send()
        .await?;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let body = response.text().await?;
    let frames: Vec<Value> = body
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let kinds: Vec<&str> = frames.iter().filter_map(|f| f["result"]["kind"].as_str()).collect();
    assert_eq!(kinds, ["task", "artifact-update", "status-update"], "{body}");
    assert!(frames.iter().all(|f| f["id"] == "s1" && f["jsonrpc"] == "2.0"));
    assert_eq!(frames[0]["result"]["status"]["state"], "submitted");
    assert_eq!(frames[1]["result"]["artifact"]["parts"][0]["text"], "Streamed answer");
    assert_eq!(frames[2]["result"]["status"]["state"], "completed");
    assert_eq!(frames[2]["result"]["final"], true);
    assert_eq!(frames[2]["result"]["taskId"], frames[0]["result"]["id"]);
    Ok(())
}

#[tokio::test]
async fn bad_calls_are_answered_with_json_rpc_error_objects() -> R {
    let (model, app, tenant, agent) = setup(json!({})).await?;
    let raw = |body: &'static str| {
        app.client(&tenant.key, Method::POST, &format!("/agents/{agent}/a2a"))
            .header("content-type", "application/json")
            .body(body)
    };
    let parse = send(raw("{not json")).await?;
    assert_eq!((error_code(&parse), &parse.1["id"]), (Some(-32700), &Value::Null));
    let batch = send(raw("[]")).await?;
    assert_eq!(error_code(&batch), Some(-32600));
    let answer = call(&app, &tenant.key, &agent, "tasks/list-everything", json!({})).await?;
    assert_eq!(error_code(&answer), Some(-32601));
    let answer = call(&app, &tenant.key, &agent, "message/send", json!({})).await?;
    assert_eq!(error_code(&answer), Some(-32602));
    assert_eq!(answer.1["error"]["data"]["param"], "message");
    let file = json!({"message": {"role": "user", "messageId": "m1",
                                  "parts": [{"kind": "file", "file": {"uri": "https://example.com/a.png"}}]}});
    let answer = call(&app, &tenant.key, &agent, "message/send", file).await?;
    assert_eq!(error_code(&answer), Some(-32005));
    let agent_role =
        json!({"message": {"role": "agent", "messageId": "m1", "parts": [{"kind": "text", "text": "x"}]}});
    assert_eq!(error_code(&call(&app, &tenant.key, &agent, "message/send", agent_role).await?), Some(-32602));
    let answer = call(&app, &tenant.key, &agent, "tasks/get", json!({"id": "nope"})).await?;
    assert_eq!(error_code(&answer), Some(-32001));
    let answer = call(&app, &tenant.key, &agent, "tasks/pushNotificationConfig/set", json!({})).await?;
    assert_eq!(error_code(&answer), Some(-32003));
    // No model call for any of them.
    assert!(model.requests().is_empty());

    // Without a key: HTTP 401.
    let (status, _) =
        send(app.request(Method::POST, &format!("/api/client/v1/agents/{agent}/a2a")).json(&json!({})))
            .await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    Ok(())
}
