//! Seed 002: the call that titles a session is a model call like the turn's: its cost counts
//! toward the tenant's monthly spend, on the session, and in the session's log (`usage`).

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::json;

type R = anyhow::Result<()>;

/// The scripted model answers 10 tokens in and 5 out: gpt-4o-mini ($0.15/$0.60 per million)
/// for the turn, gpt-4.1 ($2/$8) for the title.
const TURN_COST: f64 = 10.0 * 0.15e-6 + 5.0 * 0.60e-6;
const TITLE_COST: f64 = 10.0 * 2.0e-6 + 5.0 * 8.0e-6;

fn assert_usd(actual: &serde_json::Value, expected: f64, context: &serde_json::Value) {
    let value = actual.as_f64().unwrap_or(f64::NAN);
    assert!((value - expected).abs() < 1e-12, "{value} != {expected}: {context}");
}

#[tokio::test]
async fn a_title_call_counts_toward_the_tenants_spend_the_session_and_its_log() -> R {
    let model = ScriptedModel::start().await?;
    let app =
        TestApp::spawn_with_model_and(&model, |app| app.with_title_model(Some("gpt-4.1".into()))).await?;
    let (status, tenant) = send(
        app.core(Method::POST, "/core/v1/tenants")
            .json(&json!({"name": "titled", "monthly_spend_limit_usd": 10})),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{tenant}");
    let tenant_id = str_field(&tenant, "id")?;
    let project = app.tenant().await?;
    let attach = format!("/core/v1/tenants/{tenant_id}/projects/{}", project.project_id);
    assert_eq!(send(app.core(Method::PUT, &attach)).await?.0, StatusCode::OK);
    let agent = app.create_agent(&project.key, json!({"name": "a", "model": "gpt-4o-mini"})).await?;

    model.push(Reply::text("Paris is lovely in May."));
    model.push(Reply::text("Spring trip to Paris"));
    let (status, body) = send(
        app.client(&project.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "input": "Plan my Paris trip"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(model.requests().len(), 2);
    let session_id = str_field(&body, "session_id")?;

    let (_, session) =
        send(app.client(&project.key, Method::GET, &format!("/sessions/{session_id}"))).await?;
    assert_eq!(session["title"], "Spring trip to Paris");
    assert_usd(&session["cost_usd"], TURN_COST + TITLE_COST, &session);

    let (_, tenant) = send(app.core(Method::GET, &format!("/core/v1/tenants/{tenant_id}"))).await?;
    assert_usd(&tenant["month_spent_usd"], TURN_COST + TITLE_COST, &tenant);

    let (status, page) =
        send(app.client(&project.key, Method::GET, &format!("/sessions/{session_id}/events?limit=100")))
            .await?;
    assert_eq!(status, StatusCode::OK, "{page}");
    let usage: Vec<_> =
        page["data"].as_array().into_iter().flatten().filter(|e| e["type"] == "usage").collect();
    assert_eq!(usage.len(), 2, "{page}");
    let title = usage.iter().find(|e| e["data"]["model"] == "gpt-4.1").ok_or(anyhow::anyhow!("{page}"))?;
    assert_eq!(title["data"]["purpose"], "title", "{title}");
    assert_eq!(
        (title["data"]["input_tokens"].clone(), title["data"]["output_tokens"].clone()),
        (json!(10), json!(5))
    );
    assert_usd(&title["data"]["cost_usd"], TITLE_COST, title);
    // Every sequence number is taken once, in order.
    let seqs: Vec<u64> =
        page["data"].as_array().into_iter().flatten().filter_map(|e| e["id"].as_u64()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    Ok(())
}
