//! Attacks on webhook delivery as a request forger (issue 24, item 3): a project points an
//! endpoint or a background run's callback at the emulator, at the gateway itself or at an
//! unlisted loopback service, reads the answer back through `responseExcerpt`, or gets there
//! by a redirect or a name. Non-public targets are an explicit `host:port` allow-list, and the
//! AWS endpoint's port and the gateway's own are never reached, even when listed.

// The receiver helpers panic like the tests they serve.
#![allow(clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentplane_api::App;
use agentplane_domain::ProjectId;
use agentplane_domain::webhook::signature::SigningSecret;
use agentplane_domain::webhook::targets::PrivateTargets;
use agentplane_domain::webhook::{self, EndpointFields, EndpointId, MAX_EXCERPT_BYTES, StoredSecret};
use agentplane_engine::background::BackgroundConfig;
use agentplane_engine::webhooks::{SealKey, WebhookConfig};
use agentplane_tests::model::ScriptedModel;
use agentplane_tests::{Tenant, TestApp, endpoint, send, unique_prefix};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use reqwest::Method;
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// A loopback service that records what reached it and answers `status` with `body` (and a
/// `Location` when `location` is set).
#[derive(Clone)]
struct Service {
    addr: std::net::SocketAddr,
    hits: Arc<Mutex<Vec<String>>>,
}

impl Service {
    async fn start(status: u16, body: String, location: Option<String>) -> Self {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let seen = hits.clone();
        let handler = move |uri: axum::http::Uri| {
            let seen = seen.clone();
            let body = body.clone();
            let location = location.clone();
            async move {
                seen.lock().expect("lock").push(uri.to_string());
                let mut headers = HeaderMap::new();
                if let Some(to) = location {
                    headers.insert(header::LOCATION, HeaderValue::from_str(&to).expect("location"));
                }
                (StatusCode::from_u16(status).expect("status"), headers, body)
            }
        };
        let router = axum::Router::new().fallback(handler);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self { addr, hits }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn hits(&self) -> Vec<String> {
        self.hits.lock().expect("lock").clone()
    }
}

fn key() -> Arc<SealKey> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("random");
    Arc::new(SealKey::from_bytes(&bytes).expect("key"))
}

/// The targets the local gateway listening on `listen` builds from the allow-list `list`.
fn gateway_targets(list: &str, listen: &str) -> PrivateTargets {
    agentplane_local::webhooks::targets(list, listen, &endpoint()).expect("a usable allow-list")
}

async fn app_with(targets: PrivateTargets) -> anyhow::Result<TestApp> {
    let config =
        WebhookConfig { timeout: Duration::from_secs(5), ..WebhookConfig::new(Some(key()), targets) };
    TestApp::spawn_with(move |app: App| app.with_webhooks(config)).await
}

/// Stores an endpoint at `url` directly, as if its name had resolved to a public address when
/// it was created (the create route refuses it): only the delivery's own check stands between
/// it and the target.
async fn stored_endpoint(t: &TestApp, tenant: &Tenant, url: &str) -> anyhow::Result<EndpointId> {
    let key = t.app.webhooks.key.clone().ok_or_else(|| anyhow::anyhow!("no key"))?;
    let id = EndpointId::from_random(agentplane_api::edge::random()?);
    let sealed = key
        .seal(id.as_str(), SigningSecret::from_random([3; 32]).expose().as_bytes())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let now = agentplane_api::edge::now();
    let project: ProjectId = tenant.project_id.parse().map_err(|_| anyhow::anyhow!("project id"))?;
    let endpoint = webhook::new_endpoint(
        EndpointFields { url: Some(url.to_owned()), ..Default::default() },
        id.clone(),
        webhook::Owner::Project(project),
        StoredSecret { sealed, created_at: now, expires_at: None },
        now,
    )?;
    t.store.webhooks().create(&endpoint).await?;
    Ok(id)
}

async fn test_delivery(t: &TestApp, tenant: &Tenant, id: &EndpointId) -> anyhow::Result<Value> {
    let (status, attempt) =
        send(t.client(&tenant.key, Method::POST, &format!("/webhooks/{id}/test"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {attempt}");
    Ok(attempt)
}

async fn create(t: &TestApp, tenant: &Tenant, url: &str) -> anyhow::Result<(StatusCode, Value)> {
    send(t.client(&tenant.key, Method::POST, "/webhooks").json(&json!({ "url": url }))).await
}

/// A queue of the emulator's own, to see whether a delivery put anything on it.
async fn canary_queue() -> anyhow::Result<(aws_sdk_sqs::Client, String)> {
    agentplane_tests::ensure_emulator()?;
    let sdk = agentplane_store::aws::emulator_sdk_config(&endpoint()).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let created = sqs.create_queue().queue_name(format!("{}-ssrf-canary", unique_prefix())).send().await?;
    let url = created.queue_url().ok_or_else(|| anyhow::anyhow!("no queue url"))?.to_owned();
    Ok((sqs, url))
}

fn query_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn a_webhook_never_reaches_the_emulator_even_with_a_receiver_listed() -> R {
    let receiver = Service::start(200, "thanks".into(), None).await;
    let t = app_with(gateway_targets(&receiver.addr.to_string(), "127.0.0.1:8080")).await?;
    let tenant = t.tenant().await?;
    let (sqs, queue) = canary_queue().await?;
    let emulator = endpoint().trim_end_matches('/').to_owned();
    let send_message =
        format!("{emulator}/?Action=SendMessage&QueueUrl={}&MessageBody=forged", query_escape(&queue));
    let list_queues = format!("{emulator}/?Action=ListQueues");
    let port = agentplane_engine::webhooks::url_port(&emulator).expect("the emulator's port");

    // The create route refuses it, by address and by a name that resolves to loopback.
    for url in [&send_message, &list_queues, &format!("http://localhost:{port}/?Action=ListQueues")] {
        let (status, body) = create(&t, &tenant, url).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {body}");
        assert_eq!(body["error"]["code"], "url_not_allowed", "{body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("the AWS endpoint")), "{body}");
    }

    // Stored anyway, the delivery refuses it: no status, no excerpt, nothing sent to the queue.
    for url in [&send_message, &list_queues] {
        let id = stored_endpoint(&t, &tenant, url).await?;
        let attempt = test_delivery(&t, &tenant, &id).await?;
        assert_eq!(attempt["statusCode"], Value::Null, "{attempt}");
        assert_eq!(attempt["responseExcerpt"], Value::Null, "{attempt}");
        assert!(attempt["error"].as_str().is_some_and(|e| e.contains("the AWS endpoint")), "{attempt}");
        assert!(!attempt.to_string().contains("-runs"), "a queue name leaked: {attempt}");
    }
    let received = sqs.receive_message().queue_url(&queue).wait_time_seconds(1).send().await?;
    assert!(received.messages().is_empty(), "a delivery put a message on the queue: {received:?}");

    // The listed receiver is reached, with its answer's excerpt.
    let id = stored_endpoint(&t, &tenant, &receiver.url()).await?;
    let attempt = test_delivery(&t, &tenant, &id).await?;
    assert_eq!(
        (attempt["statusCode"].clone(), attempt["responseExcerpt"].clone()),
        (json!(200), json!("thanks"))
    );
    Ok(())
}

#[tokio::test]
async fn the_gateway_and_unlisted_loopback_services_are_not_targets() -> R {
    // A stand-in for the gateway on its listen port, another loopback service nobody listed,
    // and the one receiver the developer listed.
    let gateway = Service::start(200, "gateway internals".into(), None).await;
    let other = Service::start(200, "{\"secret\":\"internal\"}".into(), None).await;
    let receiver = Service::start(200, "ok".into(), None).await;

    // Listing the gateway's own port (or the emulator's) stops the gateway from starting.
    let listen = gateway.addr.to_string();
    let err = agentplane_local::webhooks::targets(&listen, &listen, &endpoint()).expect_err("refused");
    assert!(format!("{err:#}").contains("this gateway"), "{err:#}");
    let emulator = endpoint().trim_start_matches("http://").trim_end_matches('/').to_owned();
    let err = agentplane_local::webhooks::targets(&emulator, &listen, &endpoint()).expect_err("refused");
    assert!(format!("{err:#}").contains("the AWS endpoint"), "{err:#}");
    // Entries name a host and a port: a bare host is no entry.
    assert!(agentplane_local::webhooks::targets("127.0.0.1", &listen, &endpoint()).is_err());

    let t = app_with(gateway_targets(&receiver.addr.to_string(), &listen)).await?;
    let tenant = t.tenant().await?;
    let gateway_url = format!("http://{listen}/api/client/v1/webhooks");
    for (url, why) in [(&gateway_url, "this gateway"), (&other.url(), "allow-list")] {
        let (status, body) = create(&t, &tenant, url).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains(why)), "{body}");
        let id = stored_endpoint(&t, &tenant, url).await?;
        let attempt = test_delivery(&t, &tenant, &id).await?;
        assert_eq!(attempt["statusCode"], Value::Null, "{attempt}");
        assert_eq!(attempt["responseExcerpt"], Value::Null, "{attempt}");
        assert!(attempt["error"].as_str().is_some_and(|e| e.contains(why)), "{attempt}");
    }
    assert_eq!(gateway.hits(), Vec::<String>::new(), "the gateway was reached");
    assert_eq!(other.hits(), Vec::<String>::new(), "an unlisted service was reached");
    // The same port on another loopback address is another target, not the listed one.
    let elsewhere = format!("http://127.0.0.2:{}/hook", receiver.addr.port());
    let (status, _) = create(&t, &tenant, &elsewhere).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let (status, created) = create(&t, &tenant, &receiver.url()).await?;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    Ok(())
}

#[tokio::test]
async fn a_listed_receiver_cannot_redirect_a_delivery_and_its_excerpt_is_bounded() -> R {
    let hidden = Service::start(200, "hidden".into(), None).await;
    let redirecting = Service::start(307, "see other".into(), Some(hidden.url())).await;
    let chatty = Service::start(500, "x".repeat(10_000), None).await;
    let list = format!("{},{}", redirecting.addr, chatty.addr);
    let t = app_with(gateway_targets(&list, "127.0.0.1:8080")).await?;
    let tenant = t.tenant().await?;

    // A 3xx is an answer like any other: not followed, so the unlisted service never hears.
    let id = stored_endpoint(&t, &tenant, &redirecting.url()).await?;
    let attempt = test_delivery(&t, &tenant, &id).await?;
    assert_eq!(attempt["statusCode"], 307, "{attempt}");
    assert_eq!(redirecting.hits().len(), 1);
    assert_eq!(hidden.hits(), Vec::<String>::new(), "the redirect was followed");

    // The excerpt is the start of the answer, at most MAX_EXCERPT_BYTES.
    let id = stored_endpoint(&t, &tenant, &chatty.url()).await?;
    let attempt = test_delivery(&t, &tenant, &id).await?;
    assert_eq!(attempt["statusCode"], 500, "{attempt}");
    assert_eq!(attempt["responseExcerpt"], "x".repeat(MAX_EXCERPT_BYTES), "{attempt}");
    Ok(())
}

#[tokio::test]
async fn a_background_run_cannot_call_back_the_emulator() -> R {
    let model = ScriptedModel::start().await?;
    let config = WebhookConfig::new(Some(key()), gateway_targets("", "127.0.0.1:8080"));
    let background = BackgroundConfig { wait_s: 1, ..BackgroundConfig::default() };
    let t = TestApp::spawn_with_model_and(&model, move |app| {
        app.with_webhooks(config).with_background(background)
    })
    .await?;
    let tenant = t.tenant().await?;
    let emulator = endpoint().trim_end_matches('/').to_owned();
    let callback = format!("{emulator}/?Action=ListQueues");
    let agent = t
        .create_agent(
            &tenant.key,
            json!({"name": "worker", "model": "gpt-4o-mini", "config": {"execution": {"background_enabled": true}}}),
        )
        .await?;
    let (status, body) = send(
        t.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "input": "x", "background": true, "callback_url": callback})),
    )
    .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // An agent's default callback is refused when it is saved (tests/seed_callback_url.rs) ...
    let defaulted = json!({"name": "defaulted", "model": "gpt-4o-mini",
                           "config": {"execution": {"background_enabled": true, "default_callback_url": callback}}});
    let (status, body) = send(t.client(&tenant.key, Method::POST, "/agents").json(&defaulted)).await?;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("url_not_allowed")),
        "{body}"
    );
    // ... and one stored before that check (or whose name resolved elsewhere then) is refused
    // when a run would use it.
    let project: ProjectId = tenant.project_id.parse().map_err(|_| anyhow::anyhow!("project id"))?;
    let id = agentplane_domain::ids::AgentId::from_random(agentplane_api::edge::random()?);
    let request: agentplane_api::client::agents::wire::CreateAgent = agentplane_api::body::from_object(
        defaulted.as_object().cloned().ok_or_else(|| anyhow::anyhow!("an object"))?,
    )?;
    let stored = agentplane_domain::agent::new_agent(
        agentplane_domain::agent::AgentFields::try_from(request)?,
        id,
        project,
        agentplane_api::edge::now(),
    )?;
    t.store.agents().create(&stored).await?;
    let agent = id.to_string();
    let (status, body) = send(
        t.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "input": "x", "background": true})),
    )
    .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, runs) = send(t.client(&tenant.key, Method::GET, "/runs")).await?;
    assert_eq!(status, StatusCode::OK, "{runs}");
    assert_eq!(runs["data"], json!([]), "a refused run was queued: {runs}");
    Ok(())
}
