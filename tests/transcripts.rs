//! The session transcript: the model's conversation is kept whole as its own state (DynamoDB,
//! or S3 past the item limit) and never rebuilt from the event log, whose events are cut at
//! 16 KB and expire.

use agentplane_domain::{ProjectId, SessionId};
use agentplane_store::dynamo::keys::project_pk;
use agentplane_store::dynamo::transcripts::{INLINE_TRANSCRIPT_BYTES, transcript_sk};
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, assert_error, send, str_field};
use aws_sdk_dynamodb::types::AttributeValue;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn setup() -> anyhow::Result<(ScriptedModel, TestApp, Tenant, String)> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "keeper", "model": "gpt-4o-mini", "instructions": "Be brief.", "tools": ["echo"]}),
        )
        .await?;
    Ok((model, app, tenant, agent))
}

/// Starts a session with `input`; returns its id.
async fn first_turn(app: &TestApp, tenant: &Tenant, agent: &str, input: &str) -> anyhow::Result<String> {
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/responses").json(&json!({"agent": agent, "input": input})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    anyhow::ensure!(body["status"] == "completed", "{body}");
    str_field(&body, "session_id")
}

async fn next_turn(
    app: &TestApp,
    key: &str,
    session: &str,
    input: &str,
) -> anyhow::Result<(StatusCode, Value)> {
    send(
        app.client(key, Method::POST, &format!("/sessions/{session}/messages"))
            .json(&json!({"input": input})),
    )
    .await
}

/// The messages of the model's last request.
fn last_messages(model: &ScriptedModel) -> Vec<Value> {
    model.requests().last().and_then(|r| r["messages"].as_array().cloned()).unwrap_or_default()
}

/// A text of exactly `len` characters that is not one character repeated (so a cut or a
/// shuffle shows).
fn text_of(len: usize, seed: char) -> String {
    let pattern = format!("{seed}0123456789é ");
    pattern.chars().cycle().take(len).collect()
}

/// The session's transcript item in the main table.
async fn transcript_item(
    app: &TestApp,
    tenant: &Tenant,
    session: &str,
) -> anyhow::Result<std::collections::HashMap<String, AttributeValue>> {
    let project: ProjectId = tenant.project_id.parse().map_err(|_| anyhow::anyhow!("project id"))?;
    let session: SessionId = session.parse().map_err(|_| anyhow::anyhow!("session id"))?;
    let out = app
        .store
        .dynamo
        .get_item()
        .table_name(&app.store.names.main_table)
        .key("PK", AttributeValue::S(project_pk(&project)))
        .key("SK", AttributeValue::S(transcript_sk(&session)))
        .consistent_read(true)
        .send()
        .await?;
    out.item.ok_or_else(|| anyhow::anyhow!("no transcript item"))
}

#[tokio::test]
async fn a_100000_character_input_and_a_tool_result_over_16_kb_reach_the_model_whole() -> R {
    let (model, app, tenant, agent) = setup().await?;
    let input = text_of(100_000, 'a');
    let echoed = text_of(20_000, 'b');
    model.push(Reply::tool("call_1", "echo", &json!({"text": echoed})));
    model.push(Reply::text("noted"));
    let session = first_turn(&app, &tenant, &agent, &input).await?;

    model.push(Reply::text("fine"));
    let (status, body) = next_turn(&app, &tenant.key, &session, "and now?").await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let messages = last_messages(&model);
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant", "user"]);
    assert_eq!(messages[1]["content"].as_str().map(|s| s.chars().count()), Some(100_000));
    assert_eq!(messages[1]["content"], input.as_str());
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_1");
    let result = messages[3]["content"].as_str().unwrap_or_default();
    assert!(result.len() > 16 * 1024, "{} bytes", result.len());
    assert_eq!(serde_json::from_str::<Value>(result)?, json!({"echo": {"text": echoed}}));
    assert_eq!(messages[4]["content"], "noted");
    assert_eq!(messages[5]["content"], "and now?");

    // The event log, what clients read, cut the same data down: the model did not read it.
    let (_, page) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/events?limit=100"))).await?;
    let user = page["data"].as_array().and_then(|d| d.iter().find(|e| e["type"] == "message.user").cloned());
    assert_eq!(user.map(|u| u["data"]["_truncated"].clone()), Some(json!(true)));
    Ok(())
}

#[tokio::test]
async fn a_session_whose_events_expired_keeps_its_context() -> R {
    let (model, app, tenant, agent) = setup().await?;
    model.push(Reply::text("Hello Ada."));
    let session = first_turn(&app, &tenant, &agent, "My name is Ada.").await?;

    // The events' TTL ran out: every event of the session is gone from the table.
    let pk = AttributeValue::S(format!("SESSION#{session}"));
    let out = app
        .store
        .dynamo
        .query()
        .table_name(&app.store.names.events_table)
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", pk.clone())
        .send()
        .await?;
    let items = out.items.unwrap_or_default();
    assert!(items.len() >= 4, "{} events", items.len());
    for item in items {
        let sk = item.get("SK").cloned().ok_or_else(|| anyhow::anyhow!("no SK"))?;
        app.store
            .dynamo
            .delete_item()
            .table_name(&app.store.names.events_table)
            .key("PK", pk.clone())
            .key("SK", sk)
            .send()
            .await?;
    }
    let (_, page) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/events?limit=100"))).await?;
    assert_eq!(page["data"], json!([]), "the log is empty");

    model.push(Reply::text("Ada."));
    let (status, body) = next_turn(&app, &tenant.key, &session, "What is my name?").await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let messages = last_messages(&model);
    assert_eq!(
        messages,
        vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "My name is Ada."}),
            json!({"role": "assistant", "content": "Hello Ada."}),
            json!({"role": "user", "content": "What is my name?"}),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn a_transcript_past_the_item_limit_goes_to_s3_and_reads_back_whole() -> R {
    let (model, app, tenant, agent) = setup().await?;
    let inputs: Vec<String> = ['p', 'q', 'r', 's'].iter().map(|c| text_of(100_000, *c)).collect();
    model.push(Reply::text("one"));
    let session = first_turn(&app, &tenant, &agent, &inputs[0]).await?;
    let small = transcript_item(&app, &tenant, &session).await?;
    assert!(small.contains_key("body") && !small.contains_key("object"), "a small transcript is inline");
    for (i, input) in inputs.iter().enumerate().skip(1) {
        model.push(Reply::text(&format!("reply {i}")));
        let (status, body) = next_turn(&app, &tenant.key, &session, input).await?;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // Past the limit: the item points at an object under transcripts/<project>/<session>/.
    let big = transcript_item(&app, &tenant, &session).await?;
    assert!(!big.contains_key("body"), "the body left the item");
    let key = big.get("object").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
    assert!(key.starts_with(&format!("transcripts/{}/{session}/", tenant.project_id)), "{key}");
    let objects = app.store.objects.clone().ok_or_else(|| anyhow::anyhow!("the test store has S3"))?;
    let stored = String::from_utf8(objects.get(&key).await?)?;
    assert!(stored.len() > INLINE_TRANSCRIPT_BYTES, "{} bytes", stored.len());

    model.push(Reply::text("all read"));
    let (status, body) = next_turn(&app, &tenant.key, &session, "the end").await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let messages = last_messages(&model);
    let users: Vec<&str> =
        messages.iter().filter(|m| m["role"] == "user").filter_map(|m| m["content"].as_str()).collect();
    let expected: Vec<&str> = inputs.iter().map(String::as_str).chain(["the end"]).collect();
    assert!(users == expected, "the inputs came back cut or out of order");
    assert_eq!(messages.len(), 1 + 4 * 2 + 1);

    // The save of that turn replaced the object; the one it replaced is deleted.
    let newer = transcript_item(&app, &tenant, &session).await?;
    let newer_key = newer.get("object").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
    assert_ne!(newer_key, key);
    assert!(matches!(objects.get(&key).await, Err(agentplane_store::StoreError::NotFound)));
    assert!(objects.get(&newer_key).await.is_ok());
    Ok(())
}

#[tokio::test]
async fn another_projects_key_cannot_reach_the_transcript() -> R {
    let (model, app, tenant, agent) = setup().await?;
    model.push(Reply::text("secret kept"));
    let session = first_turn(&app, &tenant, &agent, "the secret is 42").await?;
    let other = app.tenant().await?;
    let calls = model.requests().len();
    let (status, body) = next_turn(&app, &other.key, &session, "what was the secret?").await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    assert_eq!(model.requests().len(), calls, "no model call saw the transcript");
    assert!(!body.to_string().contains("42"));
    Ok(())
}
