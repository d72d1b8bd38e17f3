//! Feedback on assistant messages: one per message (a second replaces it), an agent's list
//! filtered by rating, and other projects' messages not found.

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// A turn of `agent` in a new session: the session and the event ids of its user and
/// assistant messages.
async fn turn(
    app: &TestApp,
    model: &ScriptedModel,
    key: &str,
    agent: &str,
) -> anyhow::Result<(String, u64, u64)> {
    model.push(Reply::text("an answer"));
    let (status, body) =
        send(app.client(key, Method::POST, "/responses").json(&json!({"agent": agent, "input": "hi"})))
            .await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    let session = str_field(&body, "session_id")?;
    let (_, events) =
        send(app.client(key, Method::GET, &format!("/sessions/{session}/events?limit=100"))).await?;
    let of = |kind: &str| {
        events["data"]
            .as_array()
            .and_then(|d| d.iter().find(|e| e["type"] == kind))
            .and_then(|e| e["id"].as_u64())
    };
    let (Some(user), Some(assistant)) = (of("message.user"), of("message.assistant")) else {
        anyhow::bail!("no messages in {events}");
    };
    Ok((session, user, assistant))
}

async fn rate(
    app: &TestApp,
    key: &str,
    session: &str,
    event: u64,
    body: Value,
) -> anyhow::Result<(StatusCode, Value)> {
    send(app.client(key, Method::POST, &format!("/sessions/{session}/events/{event}/feedback")).json(&body))
        .await
}

async fn setup() -> anyhow::Result<(ScriptedModel, TestApp, Tenant, String)> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app.create_agent(&tenant.key, json!({"name": "rated", "model": "gpt-4o-mini"})).await?;
    Ok((model, app, tenant, agent))
}

#[tokio::test]
async fn a_message_has_one_feedback_and_the_agent_lists_it_by_rating() -> R {
    let (model, app, tenant, agent) = setup().await?;
    let (session, _, answer) = turn(&app, &model, &tenant.key, &agent).await?;
    let (status, first) = rate(&app, &tenant.key, &session, answer, json!({"rating": "up"})).await?;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let id = str_field(&first, "id")?;
    assert!(id.starts_with("fb_") && id.len() == 27, "{id}");
    assert_eq!(first["object"], "feedback");
    assert_eq!(first["agent_id"], agent);
    assert_eq!(first["session_id"], session);
    assert_eq!(first["event_id"], answer);
    assert_eq!((&first["rating"], &first["comment"]), (&json!("up"), &Value::Null));

    // Again: replaced, same id.
    let (status, second) =
        rate(&app, &tenant.key, &session, answer, json!({"rating": "down", "comment": "too short"})).await?;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["id"], id);
    assert_eq!((&second["rating"], &second["comment"]), (&json!("down"), &json!("too short")));
    assert_eq!(second["created_at"], first["created_at"]);

    // Another message of the agent, rated up.
    let (other_session, _, other_answer) = turn(&app, &model, &tenant.key, &agent).await?;
    let (status, up) = rate(&app, &tenant.key, &other_session, other_answer, json!({"rating": "up"})).await?;
    assert_eq!(status, StatusCode::CREATED);

    let list =
        |query: &str| send(app.client(&tenant.key, Method::GET, &format!("/agents/{agent}/feedback{query}")));
    let (status, all) = list("").await?;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<&str> = all["data"]
        .as_array()
        .map(|d| d.iter().filter_map(|f| f["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        ids,
        vec![up["id"].as_str().unwrap_or_default(), id.as_str()],
        "newest first, one per message"
    );
    let (_, downs) = list("?rating=down").await?;
    assert_eq!(downs["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(downs["data"][0]["comment"], "too short");
    let (_, ups) = list("?rating=up&limit=1").await?;
    assert_eq!(ups["data"][0]["id"], up["id"]);
    let (_, page) = list(&format!("?after={}", up["id"].as_str().unwrap_or_default())).await?;
    assert_eq!(page["data"][0]["id"], id);
    assert_error(list("?rating=meh").await?.as_pair(), StatusCode::BAD_REQUEST, "invalid_request_error");
    assert_error(
        list("?after=fb_000000000000000000000000").await?.as_pair(),
        StatusCode::NOT_FOUND,
        "cursor_not_found",
    );
    Ok(())
}

trait Pair {
    fn as_pair(&self) -> (StatusCode, &Value);
}

impl Pair for (StatusCode, Value) {
    fn as_pair(&self) -> (StatusCode, &Value) {
        (self.0, &self.1)
    }
}

#[tokio::test]
async fn only_assistant_messages_of_the_callers_project_can_be_rated() -> R {
    let (model, app, tenant, agent) = setup().await?;
    let stranger = app.tenant().await?;
    let (session, user, answer) = turn(&app, &model, &tenant.key, &agent).await?;
    // Another project: the session, the message and the agent are not found.
    assert_error(
        rate(&app, &stranger.key, &session, answer, json!({"rating": "up"})).await?.as_pair(),
        StatusCode::NOT_FOUND,
        "session_not_found",
    );
    assert_error(
        send(app.client(&stranger.key, Method::GET, &format!("/agents/{agent}/feedback"))).await?.as_pair(),
        StatusCode::NOT_FOUND,
        "agent_not_found",
    );
    // A user message is not an assistant message; an event that does not exist is not found.
    let (status, body) = rate(&app, &tenant.key, &session, user, json!({"rating": "up"})).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    assert_eq!(body["error"]["param"], "event_id");
    for missing in ["999", "0", "abc"] {
        let (status, body) = send(
            app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/events/{missing}/feedback"))
                .json(&json!({"rating": "up"})),
        )
        .await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "message_not_found");
    }
    for (bad, param) in [(json!({}), "rating"), (json!({"rating": "up", "comment": 1}), "comment")] {
        let (status, body) = rate(&app, &tenant.key, &session, answer, bad).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(body["error"]["param"], param);
    }
    // Nothing was recorded.
    let (_, list) = send(app.client(&tenant.key, Method::GET, &format!("/agents/{agent}/feedback"))).await?;
    assert_eq!(list["data"], json!([]));
    Ok(())
}

#[tokio::test]
async fn concurrent_first_ratings_leave_one_feedback() -> R {
    let (model, app, tenant, agent) = setup().await?;
    let (session, _, answer) = turn(&app, &model, &tenant.key, &agent).await?;
    let rates = (0..12).map(|i| {
        let rating = if i % 2 == 0 { "up" } else { "down" };
        rate(&app, &tenant.key, &session, answer, json!({"rating": rating}))
    });
    let answers = futures_util::future::join_all(rates).await;
    let mut created = 0;
    let mut ids = std::collections::HashSet::new();
    for answer in answers {
        let (status, body) = answer?;
        match status {
            StatusCode::CREATED => created += 1,
            StatusCode::OK => {}
            other => anyhow::bail!("{other} {body}"),
        }
        ids.insert(str_field(&body, "id")?);
    }
    assert_eq!((created, ids.len()), (1, 1));
    let (_, list) = send(app.client(&tenant.key, Method::GET, &format!("/agents/{agent}/feedback"))).await?;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1));
    Ok(())
}
