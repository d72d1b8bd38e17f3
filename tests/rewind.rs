//! Regenerate and edit through the whole transcript: the replaced turns stay in the log, marked
//! superseded (a `turn.superseded` event, and `superseded: true` on their events), the model
//! no longer sees them (in the new turn and every later one), and a client that renders the log
//! gets the conversation as it now stands.

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn setup() -> anyhow::Result<(ScriptedModel, TestApp, Tenant, String)> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app.create_agent(&tenant.key, json!({"name": "rewind", "model": "gpt-4o-mini"})).await?;
    Ok((model, app, tenant, agent))
}

async fn say(app: &TestApp, model: &ScriptedModel, key: &str, session: &str, text: &str, answer: &str) -> R {
    model.push(Reply::text(answer));
    let (status, body) = send(
        app.client(key, Method::POST, &format!("/sessions/{session}/messages")).json(&json!({"input": text})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    Ok(())
}

async fn log(app: &TestApp, key: &str, session: &str) -> anyhow::Result<Vec<Value>> {
    let (status, page) =
        send(app.client(key, Method::GET, &format!("/sessions/{session}/events?limit=100"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {page}");
    Ok(page["data"].as_array().cloned().unwrap_or_default())
}

/// The conversation a client renders: user and assistant messages of turns no
/// `turn.superseded` event names (the markers as a live SSE client sees them).
fn rendered(events: &[Value]) -> Vec<String> {
    let gone: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "turn.superseded")
        .flat_map(|e| e["data"]["turn_ids"].as_array().into_iter().flatten())
        .collect();
    events
        .iter()
        .filter(|e| !gone.contains(&&e["turn_id"]))
        .filter_map(|e| match e["type"].as_str() {
            Some("message.user") => Some(format!("user: {}", e["data"]["text"].as_str().unwrap_or_default())),
            Some("message.assistant") => {
                Some(format!("agent: {}", e["data"]["text"].as_str().unwrap_or_default()))
            }
            _ => None,
        })
        .collect()
}

/// The same from the poll's own `superseded` flags.
fn rendered_by_flags(events: &[Value]) -> Vec<String> {
    let live: Vec<Value> = events.iter().filter(|e| e["superseded"] != true).cloned().collect();
    rendered(&live)
}

/// The texts of the messages the model got in its last request.
fn last_request(model: &ScriptedModel) -> Vec<String> {
    let requests = model.requests();
    requests
        .last()
        .and_then(|r| r["messages"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn regenerate_answers_the_last_message_again_and_the_old_answer_stays_marked() -> R {
    let (model, app, tenant, agent) = setup().await?;
    let key = &tenant.key;
    let (_, created) =
        send(app.client(key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    let session = str_field(&created, "id")?;
    say(&app, &model, key, &session, "q1", "a1").await?;
    say(&app, &model, key, &session, "q2", "a2").await?;

    model.push(Reply::text("a2 again"));
    let (status, body) =
        send(app.client(key, Method::POST, &format!("/sessions/{session}/regenerate"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["output_text"], "a2 again", "{body}");
    // The model saw q2 once, and not the answer it replaces.
    assert_eq!(last_request(&model), ["q1", "a1", "q2"]);

    let events = log(&app, key, &session).await?;
    let marker = events.iter().find(|e| e["type"] == "turn.superseded").cloned().unwrap_or_default();
    assert_eq!(marker["data"]["reason"], "regenerate");
    let old_turn = events.iter().find(|e| e["data"]["text"] == "a2").map(|e| e["turn_id"].clone());
    assert_eq!(Some(marker["data"]["turn_ids"][0].clone()), old_turn);
    // Nothing deleted: the old answer is still there, flagged.
    let old = events.iter().find(|e| e["data"]["text"] == "a2").cloned().unwrap_or_default();
    assert_eq!(old["superseded"], true);
    assert!(events.iter().filter(|e| e["data"]["text"] == "a1").all(|e| e.get("superseded").is_none()));
    let expected = ["user: q1", "agent: a1", "user: q2", "agent: a2 again"];
    assert_eq!(rendered(&events), expected);
    assert_eq!(rendered_by_flags(&events), expected);

    // The next turn's conversation is the new one, from the saved transcript.
    say(&app, &model, key, &session, "q3", "a3").await?;
    assert_eq!(last_request(&model), ["q1", "a1", "q2", "a2 again", "q3"]);
    Ok(())
}

#[tokio::test]
async fn an_edit_continues_from_the_edited_message_and_supersedes_every_later_turn() -> R {
    let (model, app, tenant, agent) = setup().await?;
    let key = &tenant.key;
    let (_, created) =
        send(app.client(key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    let session = str_field(&created, "id")?;
    say(&app, &model, key, &session, "q1", "a1").await?;
    say(&app, &model, key, &session, "q2", "a2").await?;
    say(&app, &model, key, &session, "q3", "a3").await?;
    let events = log(&app, key, &session).await?;
    let q2 = events.iter().find(|e| e["data"]["text"] == "q2").and_then(|e| e["id"].as_u64()).unwrap_or(0);

    model.push(Reply::text("a2 edited"));
    let (status, body) = send(
        app.client(key, Method::POST, &format!("/sessions/{session}/events/{q2}/edit"))
            .json(&json!({"input": "q2 edited"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(last_request(&model), ["q1", "a1", "q2 edited"]);
    let events = log(&app, key, &session).await?;
    let marker = events.iter().find(|e| e["type"] == "turn.superseded").cloned().unwrap_or_default();
    assert_eq!((&marker["data"]["reason"], &marker["data"]["event_id"]), (&json!("edit"), &json!(q2)));
    assert_eq!(marker["data"]["turn_ids"].as_array().map(Vec::len), Some(2));
    let expected = ["user: q1", "agent: a1", "user: q2 edited", "agent: a2 edited"];
    assert_eq!(rendered(&events), expected);
    assert_eq!(rendered_by_flags(&events), expected);
    assert_eq!(events.iter().filter(|e| e["superseded"] == true && e["type"] == "message.user").count(), 2);

    // A superseded message cannot be edited again; a later regenerate replaces the edit's answer.
    let answer = send(
        app.client(key, Method::POST, &format!("/sessions/{session}/events/{q2}/edit"))
            .json(&json!({"input": "x"})),
    )
    .await?;
    assert_error((answer.0, &answer.1), StatusCode::NOT_FOUND, "message_not_found");
    model.push(Reply::text("a2 edited, again"));
    let (status, _) = send(app.client(key, Method::POST, &format!("/sessions/{session}/regenerate"))).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(last_request(&model), ["q1", "a1", "q2 edited"]);
    let events = log(&app, key, &session).await?;
    assert_eq!(rendered(&events), ["user: q1", "agent: a1", "user: q2 edited", "agent: a2 edited, again"]);
    Ok(())
}

#[tokio::test]
async fn rewinds_are_refused_where_there_is_nothing_to_replace() -> R {
    let (model, app, tenant, agent) = setup().await?;
    let key = &tenant.key;
    let (_, created) =
        send(app.client(key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    let session = str_field(&created, "id")?;
    let answer = send(app.client(key, Method::POST, &format!("/sessions/{session}/regenerate"))).await?;
    assert_error((answer.0, &answer.1), StatusCode::CONFLICT, "nothing_to_regenerate");
    say(&app, &model, key, &session, "q1", "a1").await?;
    let events = log(&app, key, &session).await?;
    let a1 =
        events.iter().find(|e| e["type"] == "message.assistant").and_then(|e| e["id"].as_u64()).unwrap_or(0);
    let q1 = events.iter().find(|e| e["type"] == "message.user").and_then(|e| e["id"].as_u64()).unwrap_or(0);
    let edit = |path: String, body: Value| send(app.client(key, Method::POST, &path).json(&body));
    let answer = edit(format!("/sessions/{session}/events/{a1}/edit"), json!({"input": "x"})).await?;
    assert_error((answer.0, &answer.1), StatusCode::BAD_REQUEST, "invalid_request_error");
    let answer = edit(format!("/sessions/{session}/events/999/edit"), json!({"input": "x"})).await?;
    assert_error((answer.0, &answer.1), StatusCode::NOT_FOUND, "message_not_found");
    let answer = edit(format!("/sessions/{session}/events/{q1}/edit"), json!({})).await?;
    assert_error((answer.0, &answer.1), StatusCode::BAD_REQUEST, "invalid_request_error");
    let answer =
        edit(format!("/sessions/{session}/events/{q1}/edit"), json!({"input": "x", "extra": 1})).await?;
    assert_error((answer.0, &answer.1), StatusCode::BAD_REQUEST, "invalid_request_error");
    // Another project's session: not found, and nothing ran or changed.
    let other = app.tenant().await?;
    let answer =
        send(app.client(&other.key, Method::POST, &format!("/sessions/{session}/regenerate"))).await?;
    assert_error((answer.0, &answer.1), StatusCode::NOT_FOUND, "session_not_found");
    let path = format!("/sessions/{session}/events/{q1}/edit");
    let answer = send(app.client(&other.key, Method::POST, &path).json(&json!({"input": "x"}))).await?;
    assert_error((answer.0, &answer.1), StatusCode::NOT_FOUND, "session_not_found");
    assert_eq!(model.requests().len(), 1);
    assert!(log(&app, key, &session).await?.iter().all(|e| e["type"] != "turn.superseded"));
    Ok(())
}
