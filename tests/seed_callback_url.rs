//! Seed 002: an agent's `config.execution.default_callback_url` is checked when the agent is
//! saved (create and PATCH), by the rules a webhook endpoint's URL and a run's `callback_url`
//! follow (one check, `webhooks::service::check_reachable`): an http(s) URL, and no address
//! deliveries may not reach (the emulator, this gateway, an unlisted private service). The
//! refusal is the agent-save 400 naming the field; nothing is saved. Deliveries check again
//! (tests/attack_webhook_ssrf.rs).

// The receiver helper panics like the tests it serves.
#![allow(clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use agentplane_api::App;
use agentplane_engine::webhooks::{SealKey, WebhookConfig};
use agentplane_tests::{Tenant, TestApp, endpoint, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

const PARAM: &str = "config.execution.default_callback_url";

fn key() -> Arc<SealKey> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("random");
    Arc::new(SealKey::from_bytes(&bytes).expect("key"))
}

/// An app whose deliveries may reach only `listed` among non-public addresses, as the local
/// gateway listening on 127.0.0.1:8080 builds its rules.
async fn app_allowing(listed: &str) -> anyhow::Result<TestApp> {
    let targets = agentplane_local::webhooks::targets(listed, "127.0.0.1:8080", &endpoint())?;
    let config =
        WebhookConfig { timeout: Duration::from_secs(5), ..WebhookConfig::new(Some(key()), targets) };
    TestApp::spawn_with(move |app: App| app.with_webhooks(config)).await
}

async fn create(app: &TestApp, tenant: &Tenant, url: &str) -> anyhow::Result<(StatusCode, Value)> {
    send(app.client(&tenant.key, Method::POST, "/agents").json(&json!({
        "name": "bg", "model": "gpt-4o-mini",
        "config": {"execution": {"background_enabled": true, "default_callback_url": url}},
    })))
    .await
}

#[tokio::test]
async fn a_default_callback_url_deliveries_may_not_reach_is_refused_when_saved() -> R {
    let listed = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let listed_addr = listed.local_addr()?;
    let app = app_allowing(&listed_addr.to_string()).await?;
    let tenant = app.tenant().await?;
    let emulator = endpoint().trim_end_matches('/').to_owned();
    let port = agentplane_engine::webhooks::url_port(&emulator).expect("the emulator's port");

    // Addresses deliveries may not reach: 400 `url_not_allowed` naming the field.
    for (url, why) in [
        (format!("{emulator}/?Action=ListQueues"), "the AWS endpoint"),
        (format!("http://localhost:{port}/?Action=ListQueues"), "the AWS endpoint"),
        ("http://127.0.0.1:8080/api/client/v1/agents".to_owned(), "this gateway"),
        ("http://169.254.169.254/latest/meta-data/".to_owned(), "metadata"),
        ("http://10.1.2.3/hook".to_owned(), "allow-list"),
        (format!("http://127.0.0.1:{}/hook", listed_addr.port() ^ 1), "allow-list"),
    ] {
        let (status, body) = create(&app, &tenant, &url).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
        assert_eq!(body["error"]["code"], "url_not_allowed", "{body}");
        assert_eq!(body["error"]["param"], PARAM, "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(why) && message.contains(PARAM), "{url}: {message}");
    }
    // Not an http(s) URL: the agent-save 400 naming the field.
    for url in ["ftp://hooks.example.com/x", "hooks.example.com/x", "http://user:pw@hooks.example.com/", ""] {
        let (status, body) = create(&app, &tenant, url).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {body}");
        assert_eq!(
            (body["error"]["code"].clone(), body["error"]["param"].clone()),
            (json!("invalid_request_error"), json!(PARAM)),
            "{url}: {body}"
        );
    }
    let (status, list) = send(app.client(&tenant.key, Method::GET, "/agents")).await?;
    assert_eq!((status, list["data"].clone()), (StatusCode::OK, json!([])), "a refused agent was saved");

    // A public host (a name that does not resolve yet is accepted: its deliveries fail), and the
    // deployment's listed receiver, are saved.
    let (status, body) = create(&app, &tenant, "https://hooks.example.com/runs").await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let listed_url = format!("http://{listed_addr}/hook");
    let (status, body) = create(&app, &tenant, &listed_url).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["config"]["execution"]["default_callback_url"], json!(listed_url));

    // A PATCH is checked the same way (only when the URL changes), and a refused one changes nothing.
    let id = str_field(&body, "id")?;
    let patch = |url: Value| {
        send(
            app.client(&tenant.key, Method::PATCH, &format!("/agents/{id}"))
                .json(&json!({"config": {"execution": {"default_callback_url": url}}})),
        )
    };
    let (status, body) = patch(json!(format!("{emulator}/?Action=ListQueues"))).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        (body["error"]["code"].clone(), body["error"]["param"].clone()),
        (json!("url_not_allowed"), json!(PARAM))
    );
    let (_, read) = send(app.client(&tenant.key, Method::GET, &format!("/agents/{id}"))).await?;
    assert_eq!(read["config"]["execution"]["default_callback_url"], json!(listed_url), "{read}");
    let (status, body) = patch(Value::Null).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["config"]["execution"]["default_callback_url"], Value::Null);
    drop(listed);
    Ok(())
}
