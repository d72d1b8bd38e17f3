//! Seed 002: `humanInTheLoop.answer_key_ids` says who may answer a paused turn's actions. By
//! default any key of the project may; with a list, only those keys: another key's answer is
//! 403 `answer_not_permitted` and the action stays pending. The list is validated when the agent
//! is saved (well-formed, distinct, 1 to 20, live keys of the project).

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn agent_with(app: &TestApp, tenant: &Tenant, hitl: Value) -> anyhow::Result<(StatusCode, Value)> {
    send(app.client(&tenant.key, Method::POST, "/agents").json(&json!({
        "name": "careful", "model": "gpt-4o-mini", "tools": ["add"], "config": {"humanInTheLoop": hitl},
    })))
    .await
}

/// A turn that pauses on an approval of `add`: the session and the action ids.
async fn paused(app: &TestApp, tenant: &Tenant, agent: &str) -> anyhow::Result<(String, String)> {
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "input": "add 2 and 3"})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::OK && body["status"] == "requires_action", "{status} {body}");
    let action = str_field(&body["required_action"]["actions"][0], "id")?;
    Ok((str_field(&body, "session_id")?, action))
}

async fn answer(
    app: &TestApp,
    key: &str,
    session: &str,
    action: &str,
) -> anyhow::Result<(StatusCode, Value)> {
    send(
        app.client(key, Method::POST, &format!("/sessions/{session}/actions/{action}"))
            .json(&json!({"decision": "approve"})),
    )
    .await
}

#[tokio::test]
async fn only_the_listed_keys_may_answer_and_another_changes_nothing() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let (_, other_key) = app.create_key(&tenant.project_id).await?;
    let (status, agent) =
        agent_with(&app, &tenant, json!({"tool_approvals": ["add"], "answer_key_ids": [tenant.key_id]}))
            .await?;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    assert_eq!(agent["config"]["humanInTheLoop"]["answer_key_ids"], json!([tenant.key_id]));
    let agent = str_field(&agent, "id")?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    model.push(Reply::text("it is 5"));
    let (session, action) = paused(&app, &tenant, &agent).await?;

    // Another key of the same project: refused, and the action is still pending.
    let (status, body) = answer(&app, &other_key, &session, &action).await?;
    assert_error((status, &body), StatusCode::FORBIDDEN, "answer_not_permitted");
    let (status, read) =
        send(app.client(&other_key, Method::GET, &format!("/sessions/{session}/actions/{action}"))).await?;
    assert_eq!((status, read["status"].clone()), (StatusCode::OK, json!("pending")), "{read}");
    assert_eq!(model.requests().len(), 1, "the turn did not carry on");

    // The listed key answers.
    let (status, body) = answer(&app, &tenant.key, &session, &action).await?;
    assert_eq!((status, body["status"].clone()), (StatusCode::OK, json!("resolved")), "{body}");

    // The turn carries on (its continuation takes the next scripted reply).
    let started = std::time::Instant::now();
    while model.requests().len() < 2 {
        anyhow::ensure!(started.elapsed() < std::time::Duration::from_secs(30), "the turn did not carry on");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // Without a list, any key of the project may (here the other one).
    let (status, open) = agent_with(&app, &tenant, json!({"tool_approvals": ["add"]})).await?;
    assert_eq!(status, StatusCode::CREATED, "{open}");
    assert_eq!(open["config"]["humanInTheLoop"]["answer_key_ids"], Value::Null);
    model.push(Reply::tool("call_2", "add", &json!({"a": 1, "b": 1})));
    model.push(Reply::text("it is 2"));
    let (session, action) = paused(&app, &tenant, &str_field(&open, "id")?).await?;
    let (status, body) = answer(&app, &other_key, &session, &action).await?;
    assert_eq!((status, body["status"].clone()), (StatusCode::OK, json!("resolved")), "{body}");
    Ok(())
}

#[tokio::test]
async fn the_list_is_checked_when_the_agent_is_saved() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let stranger = app.tenant().await?;
    let param = "config.humanInTheLoop.answer_key_ids";
    let many: Vec<String> = (0..21).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    for (ids, expected) in [
        (json!([]), param.to_owned()),
        (json!(many), param.to_owned()),
        (json!([tenant.key_id, tenant.key_id]), format!("{param}[1]")),
        (json!(["cpeer_not_an_id"]), format!("{param}[0]")),
        (json!(["NOT-A-UUID"]), format!("{param}[0]")),
        // Well-formed, but another project's key, or no key at all.
        (json!([tenant.key_id, stranger.key_id]), format!("{param}[1]")),
        (json!([uuid::Uuid::new_v4().to_string()]), format!("{param}[0]")),
    ] {
        let (status, body) = agent_with(&app, &tenant, json!({"answer_key_ids": ids})).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{ids}: {body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
        assert_eq!(body["error"]["param"], json!(expected), "{ids}: {body}");
    }
    let (status, list) = send(app.client(&tenant.key, Method::GET, "/agents")).await?;
    assert_eq!((status, list["data"].clone()), (StatusCode::OK, json!([])), "a refused agent was saved");

    // A PATCH is checked the same way, and a refused one changes nothing.
    let (status, agent) = agent_with(&app, &tenant, json!({})).await?;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    let id = str_field(&agent, "id")?;
    let patch = |ids: Value| {
        send(
            app.client(&tenant.key, Method::PATCH, &format!("/agents/{id}"))
                .json(&json!({"config": {"humanInTheLoop": {"answer_key_ids": ids}}})),
        )
    };
    let (status, body) = patch(json!([stranger.key_id])).await?;
    assert_eq!(
        (status, body["error"]["param"].clone()),
        (StatusCode::BAD_REQUEST, json!(format!("{param}[0]")))
    );
    let (status, body) = patch(json!([tenant.key_id])).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["config"]["humanInTheLoop"]["answer_key_ids"], json!([tenant.key_id]));
    // Null goes back to any key.
    let (status, body) = patch(Value::Null).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["config"]["humanInTheLoop"]["answer_key_ids"], Value::Null);
    Ok(())
}
