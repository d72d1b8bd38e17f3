//! Session titles: an untitled session is named after its first turn by one model call (its
//! usage counted on the session); a session with a title keeps it; a title set meanwhile is
//! never overwritten; later turns make no title call.

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn setup() -> anyhow::Result<(ScriptedModel, TestApp, Tenant, String)> {
    let model = ScriptedModel::start().await?;
    let app =
        TestApp::spawn_with_model_and(&model, |app| app.with_title_model(Some("title-mini".into()))).await?;
    let tenant = app.tenant().await?;
    let agent = app.create_agent(&tenant.key, json!({"name": "titled", "model": "gpt-4o-mini"})).await?;
    Ok((model, app, tenant, agent))
}

async fn session(app: &TestApp, key: &str, id: &str) -> anyhow::Result<Value> {
    let (status, body) = send(app.client(key, Method::GET, &format!("/sessions/{id}"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    Ok(body)
}

#[tokio::test]
async fn an_untitled_session_is_named_after_its_first_turn_and_only_then() -> R {
    let (model, app, tenant, agent) = setup().await?;
    model.push(Reply::text("Paris is lovely in May."));
    model.push(Reply::text("\"Spring trip to Paris.\""));
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "input": "Plan my Paris trip"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["output_text"], "Paris is lovely in May.");
    let id = str_field(&body, "session_id")?;
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    // The title call: the cheap model, no tools, the first exchange.
    assert_eq!(requests[1]["model"], "title-mini");
    assert!(
        requests[1].get("tools").is_none_or(|t| t.as_array().is_none_or(Vec::is_empty)),
        "{}",
        requests[1]
    );
    let exchange = requests[1]["messages"].to_string();
    assert!(exchange.contains("Plan my Paris trip") && exchange.contains("Paris is lovely"), "{exchange}");
    let named = session(&app, &tenant.key, &id).await?;
    assert_eq!(named["title"], "Spring trip to Paris");
    // Both calls' tokens are on the session (the scripted model answers 10 in, 5 out).
    assert_eq!(named["usage"]["input_tokens"], 20, "{named}");

    // A later turn makes no title call, and the title stays.
    model.push(Reply::text("More."));
    let (status, _) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{id}/messages"))
            .json(&json!({"input": "more"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(model.requests().len(), 3);
    assert_eq!(session(&app, &tenant.key, &id).await?["title"], "Spring trip to Paris");

    // PATCH still sets one.
    let (status, patched) = send(
        app.client(&tenant.key, Method::PATCH, &format!("/sessions/{id}")).json(&json!({"title": "Mine"})),
    )
    .await?;
    assert_eq!((status, &patched["title"]), (StatusCode::OK, &json!("Mine")));
    Ok(())
}

#[tokio::test]
async fn a_session_with_a_title_keeps_it_and_gets_no_title_call() -> R {
    let (model, app, tenant, agent) = setup().await?;
    let (_, created) = send(
        app.client(&tenant.key, Method::POST, "/sessions")
            .json(&json!({"agent_id": agent, "title": "Chosen"})),
    )
    .await?;
    let id = str_field(&created, "id")?;
    model.push(Reply::text("hello"));
    let (status, _) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{id}/messages"))
            .json(&json!({"input": "hi"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(model.requests().len(), 1);
    assert_eq!(session(&app, &tenant.key, &id).await?["title"], "Chosen");
    Ok(())
}

#[tokio::test]
async fn a_generated_title_never_overwrites_one_set_meanwhile() -> R {
    let (_model, app, tenant, agent) = setup().await?;
    let (_, created) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    let id: agentplane_domain::SessionId = str_field(&created, "id")?.parse()?;
    let project: agentplane_domain::ProjectId = tenant.project_id.parse()?;
    let sessions = app.store.sessions();
    let now = agentplane_engine::now();
    let first =
        agentplane_domain::session::Title::generated("First").ok_or_else(|| anyhow::anyhow!("title"))?;
    let second =
        agentplane_domain::session::Title::generated("Second").ok_or_else(|| anyhow::anyhow!("title"))?;
    // Set by PATCH first: the generated one is refused.
    let (status, _) = send(
        app.client(&tenant.key, Method::PATCH, &format!("/sessions/{id}")).json(&json!({"title": "By hand"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK);
    assert!(!sessions.set_title_if_unset(&project, &id, &first, now).await?);
    assert_eq!(session(&app, &tenant.key, &id.to_string()).await?["title"], "By hand");
    // Cleared with null: one generator wins, the next is refused.
    let (status, _) = send(
        app.client(&tenant.key, Method::PATCH, &format!("/sessions/{id}")).json(&json!({"title": null})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK);
    assert!(sessions.set_title_if_unset(&project, &id, &first, now).await?);
    assert!(!sessions.set_title_if_unset(&project, &id, &second, now).await?);
    assert_eq!(session(&app, &tenant.key, &id.to_string()).await?["title"], "First");
    Ok(())
}
