//! Attacks on how requests are read (issue 24, item 8): a body naming a key twice, which one
//! parser reads as the first value and another as the last, is refused with 400 in each
//! surface's envelope and changes nothing; the A2A card never takes its URL from the request's
//! `Host` (it would hand the next caller's project key to whoever named the host).

use agentplane_api::App;
use agentplane_tests::model::ScriptedModel;
use agentplane_tests::{Tenant, TestApp, send, str_field};
use reqwest::header::CONTENT_TYPE;
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// `request` with `body` as it is written (serde_json cannot write a repeated key).
async fn raw(request: RequestBuilder, body: &str) -> anyhow::Result<(StatusCode, Value)> {
    send(request.header(CONTENT_TYPE, "application/json").body(body.to_owned())).await
}

#[tokio::test]
async fn a_repeated_key_is_refused_on_every_surface_and_creates_nothing() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;

    // Platform API (/v1): its envelope, with the request id.
    let v1 = || app.request(Method::POST, "/v1/environments").bearer_auth(&tenant.key);
    let (status, body) = raw(v1(), r#"{"name":"cheap","name":"dear"}"#).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "invalid_json", "{body}");
    assert!(body["error"]["requestId"].is_string(), "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("\"name\" twice")), "{body}");
    let (status, list) = send(app.request(Method::GET, "/v1/environments").bearer_auth(&tenant.key)).await?;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["data"], json!([]), "a refused body created an environment: {list}");

    // Client API: nested too (the repeated key inside `config`).
    for text in [
        r#"{"name":"a","model":"gpt-4o-mini","model":"gpt-4o"}"#,
        r#"{"name":"a","model":"gpt-4o-mini","config":{"execution":{"background_enabled":false,"background_enabled":true}}}"#,
    ] {
        let (status, body) = raw(app.client(&tenant.key, Method::POST, "/agents"), text).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}: {body}");
        assert_eq!(body["error"]["code"], "invalid_json", "{body}");
    }
    let (_, agents) = send(app.client(&tenant.key, Method::GET, "/agents")).await?;
    assert_eq!(agents["data"], json!([]), "a refused body created an agent: {agents}");

    // Core API.
    let (status, body) =
        raw(app.core(Method::POST, "/core/v1/projects"), r#"{"name":"one","name":"two"}"#).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "invalid_json", "{body}");

    // Sandbox API (E2B's envelope), read before any node is asked.
    let request = app.sandbox(&tenant.key, Method::POST, "/sandboxes");
    let (status, body) = raw(request, r#"{"timeout":5,"timeout":3600}"#).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["code"], 400, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("twice")), "{body}");

    // The same bodies without the repetition are taken.
    let (status, body) = raw(v1(), r#"{"name":"dear"}"#).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    Ok(())
}

async fn published_agent(app: &TestApp, tenant: &Tenant) -> anyhow::Result<String> {
    let agent = app.create_agent(&tenant.key, json!({"name": "Helper", "model": "gpt-4o-mini"})).await?;
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, &format!("/agents/{agent}/publish"))).await?;
    anyhow::ensure!(status.is_success(), "publish: {status} {body}");
    Ok(agent)
}

#[tokio::test]
async fn a_repeated_key_in_a_json_rpc_call_is_a_parse_error() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = published_agent(&app, &tenant).await?;
    let text = r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","method":"message/send","params":{}}"#;
    let (status, body) =
        raw(app.client(&tenant.key, Method::POST, &format!("/agents/{agent}/a2a")), text).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["error"]["code"], -32700, "{body}");
    assert_eq!(model.requests().len(), 0, "the model was called");
    Ok(())
}

async fn card_url(app: &TestApp, tenant: &Tenant, agent: &str) -> anyhow::Result<String> {
    let path = format!("/agents/{agent}/a2a/.well-known/agent-card.json");
    let request = app
        .client(&tenant.key, Method::GET, &path)
        .header("host", "attacker.example")
        .header("x-forwarded-proto", "https")
        .header("x-forwarded-host", "attacker.example");
    let (status, card) = send(request).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {card}");
    str_field(&card, "url")
}

#[tokio::test]
async fn the_a2a_card_never_names_the_host_a_request_claims() -> R {
    let model = ScriptedModel::start().await?;

    // The local gateway's default: its listen address (loopback for an unspecified one).
    let base = agentplane_local::public_url("0.0.0.0:8080");
    assert_eq!(base, "http://127.0.0.1:8080");
    assert_eq!(agentplane_local::public_url("127.0.0.1:9999"), "http://127.0.0.1:9999");
    let app = TestApp::spawn_with_model_and(&model, move |app: App| app.with_public_url(&base)).await?;
    let tenant = app.tenant().await?;
    let agent = published_agent(&app, &tenant).await?;
    assert_eq!(
        card_url(&app, &tenant, &agent).await?,
        format!("http://127.0.0.1:8080/api/client/v1/agents/{agent}/a2a")
    );

    // A configured public URL (the deployed stack's), as configured.
    let app =
        TestApp::spawn_with_model_and(&model, |app: App| app.with_public_url("https://api.example.com/v1/"))
            .await?;
    let tenant = app.tenant().await?;
    let agent = published_agent(&app, &tenant).await?;
    assert_eq!(
        card_url(&app, &tenant, &agent).await?,
        format!("https://api.example.com/v1/api/client/v1/agents/{agent}/a2a")
    );

    // Nothing configured and no API Gateway context: still not the claimed host.
    let app = TestApp::spawn_with_model_and(&model, |mut app: App| {
        app.public_url = None;
        app
    })
    .await?;
    let tenant = app.tenant().await?;
    let agent = published_agent(&app, &tenant).await?;
    let url = card_url(&app, &tenant, &agent).await?;
    assert!(!url.contains("attacker"), "{url}");
    assert_eq!(url, format!("http://localhost/api/client/v1/agents/{agent}/a2a"));
    Ok(())
}
