//! Tenants under Core: create, attach projects, set a monthly spend limit. A tenant's spend is
//! one atomic counter per month that every project of the tenant's turns add to; at the limit
//! new turns are refused (402 `spend_limit_reached`) and running ones pause as for a session
//! budget.

use std::time::{Duration, Instant};

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn create_tenant(app: &TestApp, body: Value) -> anyhow::Result<Value> {
    let (status, tenant) = send(app.core(Method::POST, "/core/v1/tenants").json(&body)).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {tenant}");
    Ok(tenant)
}

async fn attach(app: &TestApp, tenant: &str, project: &str) -> anyhow::Result<(StatusCode, Value)> {
    send(app.core(Method::PUT, &format!("/core/v1/tenants/{tenant}/projects/{project}"))).await
}

#[tokio::test]
async fn tenants_are_created_read_updated_and_take_projects() -> R {
    let app = TestApp::spawn().await?;
    let tenant = create_tenant(&app, json!({"name": "acme", "monthly_spend_limit_usd": 12.5})).await?;
    assert_eq!(tenant["object"], "tenant");
    assert_eq!(tenant["monthly_spend_limit_usd"], 12.5);
    assert_eq!(tenant["month_spent_usd"], 0.0);
    let id = str_field(&tenant, "id")?;

    let (status, body) = send(
        app.core(Method::PATCH, &format!("/core/v1/tenants/{id}"))
            .json(&json!({"monthly_spend_limit_usd": null})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["monthly_spend_limit_usd"], Value::Null);
    let (status, body) = send(
        app.core(Method::PATCH, &format!("/core/v1/tenants/{id}"))
            .json(&json!({"monthly_spend_limit_usd": -1})),
    )
    .await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    let (status, body) =
        send(app.core(Method::POST, "/core/v1/tenants").json(&json!({"name": "x", "extra": 1}))).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    let project = app.create_project("p").await?;
    let (status, body) = attach(&app, &id, &project).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["tenant_id"], id.as_str());
    let (status, body) = attach(&app, &id, &uuid::Uuid::new_v4().to_string()).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    let (status, body) = attach(&app, &uuid::Uuid::new_v4().to_string(), &project).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    let (status, body) = send(app.core(Method::GET, "/core/v1/tenants/nope")).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    let (status, _) = send(app.request(Method::GET, &format!("/core/v1/tenants/{id}"))).await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    Ok(())
}

#[tokio::test]
async fn the_spend_limit_counts_every_project_of_the_tenant() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    // gpt-4o-mini: 10 in / 5 out tokens cost well under a millionth of a cent... so the limit
    // is one nano-dollar: the first answer reaches it.
    let tenant =
        create_tenant(&app, json!({"name": "two-projects", "monthly_spend_limit_usd": 0.000_000_001}))
            .await?;
    let id = str_field(&tenant, "id")?;
    let a = app.tenant().await?;
    let b = app.tenant().await?;
    let lone = app.tenant().await?;
    for p in [&a.project_id, &b.project_id] {
        assert_eq!(attach(&app, &id, p).await?.0, StatusCode::OK);
    }
    let agent_a = app.create_agent(&a.key, json!({"name": "a", "model": "gpt-4o-mini"})).await?;
    let agent_b = app.create_agent(&b.key, json!({"name": "b", "model": "gpt-4o-mini"})).await?;
    let agent_lone = app.create_agent(&lone.key, json!({"name": "c", "model": "gpt-4o-mini"})).await?;
    model.push(Reply::text("spent"));
    let (status, body) =
        send(app.client(&a.key, Method::POST, "/responses").json(&json!({"agent": agent_a, "input": "hi"})))
            .await?;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Project B's turn is refused: project A's spend reached the tenant's limit.
    let (status, body) =
        send(app.client(&b.key, Method::POST, "/responses").json(&json!({"agent": agent_b, "input": "hi"})))
            .await?;
    assert_error((status, &body), StatusCode::PAYMENT_REQUIRED, "spend_limit_reached");
    assert!(body["error"]["spent_usd"].as_f64().is_some_and(|s| s > 0.0), "{body}");
    assert_eq!(body["error"]["max_cost_usd"], 0.000_000_001);
    assert_eq!(model.requests().len(), 1, "no model call for a refused turn");

    // A project of no tenant is its own, unlimited.
    model.push(Reply::text("free"));
    let (status, body) = send(
        app.client(&lone.key, Method::POST, "/responses").json(&json!({"agent": agent_lone, "input": "hi"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");

    let (_, tenant) = send(app.core(Method::GET, &format!("/core/v1/tenants/{id}"))).await?;
    assert!(tenant["month_spent_usd"].as_f64().is_some_and(|s| s > 0.0), "{tenant}");

    // Raising the limit lets the tenant's turns run again.
    let (status, _) = send(
        app.core(Method::PATCH, &format!("/core/v1/tenants/{id}"))
            .json(&json!({"monthly_spend_limit_usd": 100})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK);
    model.push(Reply::text("again"));
    let (status, body) =
        send(app.client(&b.key, Method::POST, "/responses").json(&json!({"agent": agent_b, "input": "hi"})))
            .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    Ok(())
}

#[tokio::test]
async fn a_running_turn_pauses_at_the_tenant_limit() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = create_tenant(&app, json!({"name": "t", "monthly_spend_limit_usd": 0.000_000_001})).await?;
    let id = str_field(&tenant, "id")?;
    let project = app.tenant().await?;
    assert_eq!(attach(&app, &id, &project.project_id).await?.0, StatusCode::OK);
    let agent = app
        .create_agent(&project.key, json!({"name": "a", "model": "gpt-4o-mini", "tools": ["add"]}))
        .await?;
    // The first call is allowed (nothing spent yet); the second would go past the limit.
    model.push(Reply::tool("c1", "add", &json!({"a": 1, "b": 2})));
    model.push(Reply::text("never"));
    let (status, body) = send(
        app.client(&project.key, Method::POST, "/responses").json(&json!({"agent": agent, "input": "add"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "incomplete", "{body}");
    assert_eq!(model.requests().len(), 1);
    let session = body["id"].as_str().and_then(|r| r.strip_prefix("resp_")).unwrap_or_default().to_owned();
    let started = Instant::now();
    loop {
        let (_, s) = send(app.client(&project.key, Method::GET, &format!("/sessions/{session}"))).await?;
        if s["runtime_status"] == "budget_paused" {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(10), "{s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
