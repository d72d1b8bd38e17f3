//! Seed 002: webhook payloads name the conversation by the spec's name (`conversationId`)
//! beside `sessionId`; endpoint objects name their owner (`projectId`, or `tenantId` for a
//! tenant-wide endpoint).

#![allow(clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentplane_api::App;
use agentplane_engine::webhooks::{SealKey, WebhookConfig};
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, send, str_field};
use axum::body::Bytes;
use axum::extract::State;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

fn config() -> WebhookConfig {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).expect("random");
    WebhookConfig::new(
        Some(Arc::new(SealKey::from_bytes(&key).expect("key"))),
        agentplane_tests::loopback_receivers(),
    )
}

/// A loopback receiver that keeps the bodies it got.
async fn receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    async fn hook(State(got): State<Arc<Mutex<Vec<Value>>>>, body: Bytes) -> axum::http::StatusCode {
        got.lock().expect("lock").push(serde_json::from_slice(&body).unwrap_or(Value::Null));
        axum::http::StatusCode::OK
    }
    let router = axum::Router::new().route("/hook", axum::routing::post(hook)).with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, got)
}

#[tokio::test]
async fn a_delivery_names_the_conversation_and_the_endpoint_its_project() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model_and(&model, |app: App| app.with_webhooks(config())).await?;
    let tenant = app.tenant().await?;
    let agent = app.create_agent(&tenant.key, json!({"name": "hooked", "model": "gpt-4o-mini"})).await?;
    let (url, got) = receiver().await;

    let (status, created) = send(
        app.client(&tenant.key, Method::POST, "/webhooks")
            .json(&json!({"url": url, "eventTypes": ["session.idled"]})),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["projectId"], tenant.project_id, "{created}");
    let ep = str_field(&created, "id")?;
    let (status, read) = send(app.client(&tenant.key, Method::GET, &format!("/webhooks/{ep}"))).await?;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["projectId"], tenant.project_id, "{read}");
    assert!(read.get("tenantId").is_none(), "{read}");
    let (_, list) = send(app.client(&tenant.key, Method::GET, "/webhooks")).await?;
    assert_eq!(list["data"][0]["projectId"], tenant.project_id, "{list}");

    model.push(Reply::text("hello"));
    let (status, answered) = send(
        app.client(&tenant.key, Method::POST, "/responses").json(&json!({"agent": agent, "input": "hi"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{answered}");
    let session = str_field(&answered, "session_id")?;
    let started = Instant::now();
    let delivery = loop {
        if let Some(first) = got.lock().expect("lock").first().cloned() {
            break first;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(20), "no delivery");
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(delivery["type"], "session.idled", "{delivery}");
    assert_eq!(delivery["data"]["conversationId"], session, "{delivery}");
    assert_eq!(delivery["data"]["sessionId"], session, "{delivery}");
    assert_eq!(delivery["data"]["projectId"], tenant.project_id, "{delivery}");
    Ok(())
}

#[tokio::test]
async fn a_tenant_wide_endpoint_names_its_tenant() -> R {
    let app = TestApp::spawn().await?;
    let (status, tenant) =
        send(app.core(Method::POST, "/core/v1/tenants").json(&json!({"name": "wide"}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{tenant}");
    let id = str_field(&tenant, "id")?;
    let (status, created) = send(
        app.core(Method::POST, &format!("/core/v1/tenants/{id}/webhooks"))
            .json(&json!({"url": "https://hooks.example.com/in"})),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let ep = str_field(&created, "id")?;
    let (status, read) = send(app.core(Method::GET, &format!("/core/v1/tenants/{id}/webhooks/{ep}"))).await?;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["tenantId"], id, "{read}");
    assert!(read.get("projectId").is_none(), "{read}");
    Ok(())
}
