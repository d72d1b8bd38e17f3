//! Webhook events from real state changes, delivered end to end: a turn that ends emits
//! `session.idled`, a pause `action.required`, the session budget `budget.reached`; each is
//! one `evt_` per change, fanned out through the real `webhooks` queue to every receiving
//! endpoint and verified by the Standard Webhooks reference library. Retries on the (scaled)
//! schedule by the retry job; 410 disables; a queue message delivered twice makes one attempt;
//! filters and projects are respected; an event whose queue send never happened is delivered
//! by the retry job.

// Helpers (the receiver, the verifier) panic like the tests they serve.
#![allow(clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentplane_api::App;
use agentplane_api::jobs::{SqsBatchResponse, handle_webhooks_batch, retry_forever};
use agentplane_domain::webhook::MessageId;
use agentplane_engine::webhooks::{SealKey, WebhookConfig};
use agentplane_store::{OutboxEvent, ReceivedMessage, Store, WebhooksMessage};
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, fresh_store, send, str_field};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use reqwest::Method;
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// The schedule a thousand times faster: 5 ms, 300 ms, 1.8 s, …
const SCALE: f64 = 0.001;

fn config(grace: Duration, scale: f64) -> WebhookConfig {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).expect("random");
    WebhookConfig {
        timeout: Duration::from_secs(2),
        retry_scale: scale,
        queue_grace: grace,
        ..WebhookConfig::new(
            Some(Arc::new(SealKey::from_bytes(&key).expect("key"))),
            agentplane_tests::loopback_receivers(),
        )
    }
}

/// A request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    headers: HeaderMap,
    body: String,
    at: Instant,
}

#[derive(Clone, Default)]
struct Script {
    /// Statuses to answer in order; then 200.
    statuses: Arc<Mutex<VecDeque<u16>>>,
    got: Arc<Mutex<Vec<Received>>>,
}

/// A local HTTP receiver answering its script, recording what it got.
struct Receiver {
    url: String,
    script: Script,
}

impl Receiver {
    async fn start() -> Self {
        let script = Script::default();
        async fn hook(State(s): State<Script>, headers: HeaderMap, body: Bytes) -> StatusCode {
            s.got.lock().expect("lock").push(Received {
                headers,
                body: String::from_utf8_lossy(&body).into(),
                at: Instant::now(),
            });
            let status = s.statuses.lock().expect("lock").pop_front().unwrap_or(200);
            StatusCode::from_u16(status).expect("status")
        }
        let router = axum::Router::new().route("/hook", axum::routing::post(hook)).with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self { url, script }
    }

    fn answer(&self, statuses: &[u16]) {
        self.script.statuses.lock().expect("lock").extend(statuses.iter().copied());
    }

    fn received(&self) -> Vec<Received> {
        self.script.got.lock().expect("lock").clone()
    }

    /// Waits until it got `n` requests (or 20 s); answers what it got.
    async fn wait_for(&self, n: usize) -> Vec<Received> {
        let started = Instant::now();
        loop {
            let got = self.received();
            if got.len() >= n || started.elapsed() > Duration::from_secs(20) {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

fn body_json(r: &Received) -> Value {
    serde_json::from_str(&r.body).expect("json body")
}

fn header(r: &Received, name: &str) -> String {
    r.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

fn python() -> String {
    std::env::var("AGENTPLANE_TOOLS_PYTHON")
        .unwrap_or_else(|_| format!("{}/../.localstack/tools/bin/python", env!("CARGO_MANIFEST_DIR")))
}

const VERIFY: &str = r#"
import json, sys
from standardwebhooks.webhooks import Webhook
d = json.load(sys.stdin)
try:
    Webhook(d["secret"]).verify(d["body"], d["headers"])
    print("ok")
except Exception as e:
    print("fail: %s: %s" % (type(e).__name__, e))
"#;

/// What the reference library says of a delivery under `secret`: `ok` or `fail: …`.
fn verify(secret: &str, r: &Received) -> String {
    use std::io::Write as _;
    let headers: serde_json::Map<String, Value> = ["webhook-id", "webhook-timestamp", "webhook-signature"]
        .into_iter()
        .map(|h| (h.to_owned(), Value::String(header(r, h))))
        .collect();
    let input = json!({ "secret": secret, "headers": headers, "body": r.body }).to_string();
    let mut child = std::process::Command::new(python())
        .args(["-c", VERIFY])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python with standardwebhooks (pip install standardwebhooks; AGENTPLANE_TOOLS_PYTHON)");
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("python");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

struct Setup {
    model: ScriptedModel,
    app: TestApp,
    tenant: Tenant,
    agent: String,
}

/// An app on `store` whose webhooks run the scaled schedule with the retry job every 100 ms,
/// a project and an agent (`execution` and `humanInTheLoop` as given).
async fn setup_on(store: Store, grace: Duration, scale: f64, config_json: Value) -> anyhow::Result<Setup> {
    let model = ScriptedModel::start().await?;
    let app =
        TestApp::serve_with_model_and(store, &model, move |app: App| app.with_webhooks(config(grace, scale)))
            .await?;
    tokio::spawn(retry_forever(app.app.clone(), Duration::from_millis(100)));
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "hooked", "model": "gpt-4o-mini", "tools": ["add"], "config": config_json}),
        )
        .await?;
    Ok(Setup { model, app, tenant, agent })
}

async fn setup(config_json: Value) -> anyhow::Result<Setup> {
    setup_on(fresh_store().await?, Duration::from_secs(60), SCALE, config_json).await
}

/// Creates an endpoint at `url`; its id and secret.
async fn endpoint(app: &TestApp, key: &str, url: &str, types: Value) -> anyhow::Result<(String, String)> {
    let (status, body) =
        send(app.client(key, Method::POST, "/webhooks").json(&json!({"url": url, "eventTypes": types})))
            .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {body}");
    Ok((str_field(&body, "id")?, str_field(&body, "secret")?))
}

async fn turn(s: &Setup, input: &str) -> anyhow::Result<Value> {
    let (status, body) = send(
        s.app
            .client(&s.tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": s.agent, "input": input})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    Ok(body)
}

async fn messages(app: &TestApp, key: &str, ep: &str) -> anyhow::Result<Vec<Value>> {
    let (status, body) = send(app.client(key, Method::GET, &format!("/webhooks/{ep}/messages"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    Ok(body["data"].as_array().cloned().unwrap_or_default())
}

/// Waits until the endpoint's newest message is settled (succeeded or failed).
async fn settled(app: &TestApp, key: &str, ep: &str) -> anyhow::Result<Value> {
    let started = Instant::now();
    loop {
        let found = messages(app, key, ep).await?;
        if let Some(m) = found.first().filter(|m| m["status"] != "pending") {
            return Ok(m.clone());
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(20), "never settled: {found:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_turn_that_ends_delivers_session_idled_signed_and_verified_by_the_reference_library() -> R {
    let s = setup(json!({})).await?;
    let receiver = Receiver::start().await;
    let (ep, secret) = endpoint(&s.app, &s.tenant.key, &receiver.url, json!([])).await?;
    s.model.push(Reply::text("hello"));
    let answered = turn(&s, "hi").await?;
    let session = str_field(&answered, "session_id")?;
    let got = receiver.wait_for(1).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(verify(&secret, &got[0]), "ok");
    assert!(verify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", &got[0]).starts_with("fail"));
    let body = body_json(&got[0]);
    assert_eq!(body["type"], "session.idled");
    assert_eq!(body["data"]["projectId"], s.tenant.project_id);
    assert_eq!(body["data"]["sessionId"], session);
    assert_eq!(body["data"]["runtimeStatus"], "idle");
    assert_eq!(body["data"]["stopReason"], "end_turn");
    assert!(body["data"]["turnId"].as_str().is_some_and(|t| t.starts_with("turn_")), "{body}");
    let id = header(&got[0], "webhook-id");
    assert!(id.parse::<MessageId>().is_ok(), "{id}");
    // One message, one attempt, succeeded; nothing more arrives.
    let message = settled(&s.app, &s.tenant.key, &ep).await?;
    assert_eq!((message["id"].clone(), message["status"].clone()), (json!(id), json!("succeeded")));
    assert_eq!(message["attempts"].as_array().map(Vec::len), Some(1), "{message}");
    assert_eq!(message["attempts"][0]["statusCode"], 200);
    s.app.drained().await?;
    assert_eq!(receiver.received().len(), 1);
    // The emitted event left the due index once fanned out.
    assert!(s.app.store.webhooks().unsent_events(agentplane_api::edge::now(), 10).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn a_pause_delivers_action_required_with_its_actions() -> R {
    let s = setup(json!({"humanInTheLoop": {"tool_approvals": ["add"]}})).await?;
    let receiver = Receiver::start().await;
    let (_, secret) = endpoint(&s.app, &s.tenant.key, &receiver.url, json!(["action.required"])).await?;
    s.model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    let paused = turn(&s, "add").await?;
    assert_eq!(paused["status"], "requires_action", "{paused}");
    let action = paused["required_action"]["actions"][0]["id"].as_str().unwrap_or_default().to_owned();
    let got = receiver.wait_for(1).await;
    assert_eq!(got.len(), 1);
    assert_eq!(verify(&secret, &got[0]), "ok");
    let body = body_json(&got[0]);
    assert_eq!(body["type"], "action.required");
    assert_eq!(body["data"]["runtimeStatus"], "requires_action");
    assert_eq!(body["data"]["actions"][0]["id"], action);
    assert_eq!(body["data"]["actions"][0]["type"], "approval");
    assert_eq!(body["data"]["actions"][0]["tool"], "add");
    assert!(body["data"]["actions"][0]["expiresAt"].is_i64(), "{body}");
    s.app.drained().await?;
    assert_eq!(receiver.received().len(), 1, "a filter for action.required only");
    Ok(())
}

#[tokio::test]
async fn the_session_budget_delivers_budget_reached_on_pause_and_on_stop() -> R {
    for (on_exceed, status, idled) in [("pause", "budget_paused", false), ("stop", "idle", true)] {
        let s = setup(json!({"execution": {"max_cost_usd": 0.000_001, "budget_action": on_exceed}})).await?;
        let receiver = Receiver::start().await;
        endpoint(&s.app, &s.tenant.key, &receiver.url, json!([])).await?;
        s.model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
        s.model.push(Reply::text("never"));
        let answered = turn(&s, "add").await?;
        assert_eq!(answered["stop_reason"], "budget_reached", "{answered}");
        let want = if idled { 2 } else { 1 };
        let got = receiver.wait_for(want).await;
        s.app.drained().await?;
        let got: Vec<Value> = got.iter().map(body_json).collect();
        assert_eq!(receiver.received().len(), want, "{on_exceed}: {got:?}");
        let budget = got.iter().find(|b| b["type"] == "budget.reached").expect("budget.reached");
        assert_eq!(budget["data"]["onExceed"], on_exceed);
        assert_eq!(budget["data"]["runtimeStatus"], status);
        assert_eq!(budget["data"]["maxCostUsd"], 0.000_001);
        assert!(budget["data"]["spentUsd"].as_f64().is_some_and(|s| s > 0.000_001), "{budget}");
        let idle = got.iter().find(|b| b["type"] == "session.idled");
        assert_eq!(idle.is_some(), idled, "{on_exceed}: {got:?}");
        if let Some(idle) = idle {
            assert_eq!(idle["data"]["stopReason"], "budget_reached");
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_receiver_that_fails_three_times_gets_a_fourth_attempt_that_succeeds() -> R {
    let s = setup(json!({})).await?;
    let receiver = Receiver::start().await;
    receiver.answer(&[500, 503, 502]);
    let (ep, secret) = endpoint(&s.app, &s.tenant.key, &receiver.url, json!([])).await?;
    s.model.push(Reply::text("hello"));
    turn(&s, "hi").await?;
    let got = receiver.wait_for(4).await;
    assert_eq!(got.len(), 4, "{got:?}");
    let ids: Vec<String> = got.iter().map(|r| header(r, "webhook-id")).collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "one evt_ id on every attempt: {ids:?}");
    assert!(got.iter().all(|r| verify(&secret, r) == "ok"));
    // The scaled schedule: 5 ms, then 300 ms, then 1.8 s (± the retry job's 100 ms tick).
    let gap = |i: usize| got[i].at.duration_since(got[i - 1].at);
    assert!(gap(2) >= Duration::from_millis(290), "{:?}", gap(2));
    assert!(gap(3) >= Duration::from_millis(1790), "{:?}", gap(3));
    let message = settled(&s.app, &s.tenant.key, &ep).await?;
    assert_eq!(message["status"], "succeeded");
    let codes: Vec<Value> = message["attempts"]
        .as_array()
        .map(|a| a.iter().map(|x| x["statusCode"].clone()).collect())
        .unwrap_or_default();
    assert_eq!(codes, vec![json!(500), json!(503), json!(502), json!(200)], "{message}");
    let numbers: Vec<Value> = message["attempts"]
        .as_array()
        .map(|a| a.iter().map(|x| x["number"].clone()).collect())
        .unwrap_or_default();
    assert_eq!(numbers, vec![json!(1), json!(2), json!(3), json!(4)]);
    s.app.drained().await?;
    assert_eq!(receiver.received().len(), 4, "nothing after the success");
    Ok(())
}

#[tokio::test]
async fn a_410_disables_the_endpoint_and_later_events_are_not_sent_to_it() -> R {
    let s = setup(json!({})).await?;
    let receiver = Receiver::start().await;
    receiver.answer(&[410]);
    let (ep, _) = endpoint(&s.app, &s.tenant.key, &receiver.url, json!([])).await?;
    s.model.push(Reply::text("one"));
    turn(&s, "hi").await?;
    let message = settled(&s.app, &s.tenant.key, &ep).await?;
    assert_eq!(message["status"], "failed");
    assert_eq!(message["attempts"].as_array().map(Vec::len), Some(1));
    let (_, got) = send(s.app.client(&s.tenant.key, Method::GET, &format!("/webhooks/{ep}"))).await?;
    assert_eq!(got["enabled"], false, "{got}");
    s.model.push(Reply::text("two"));
    turn(&s, "again").await?;
    s.app.drained().await?;
    assert_eq!(receiver.received().len(), 1, "a disabled endpoint receives nothing");
    assert_eq!(messages(&s.app, &s.tenant.key, &ep).await?.len(), 1);
    Ok(())
}

/// A message of `event` for the endpoint, written by the fan-out's own store call with its first
/// attempt due in a minute (so only a queue message makes it now).
async fn one_message(s: &Setup, ep: &str) -> anyhow::Result<(OutboxEvent, WebhooksMessage)> {
    let project = s.tenant.project_id.parse()?;
    let now = agentplane_api::edge::now();
    let event = OutboxEvent::new(
        MessageId::from_random([7; 12]),
        project,
        "session.idled",
        &json!({"projectId": s.tenant.project_id, "sessionId": "s", "runtimeStatus": "idle"}),
        now,
    );
    let endpoints = s.app.store.webhooks().all(&agentplane_domain::webhook::Owner::Project(project)).await?;
    let created = s.app.store.webhooks().create_messages(&event, &endpoints, now.plus_seconds(60)).await?;
    anyhow::ensure!(created.len() == 1, "{created:?}");
    // A repeated fan-out writes nothing twice.
    let again = s.app.store.webhooks().create_messages(&event, &endpoints, now.plus_seconds(60)).await?;
    anyhow::ensure!(again.is_empty(), "{again:?}");
    let attempt = WebhooksMessage::Attempt {
        owner: agentplane_domain::webhook::Owner::Project(project),
        endpoint_id: ep.parse()?,
        event_id: event.id.clone(),
        created_at: event.created_at,
        attempt: 1,
    };
    Ok((event, attempt))
}

#[tokio::test]
async fn the_same_queue_message_delivered_twice_makes_one_attempt() -> R {
    let s = setup(json!({})).await?;
    let receiver = Receiver::start().await;
    let (ep, _) = endpoint(&s.app, &s.tenant.key, &receiver.url, json!([])).await?;
    let (_, attempt) = one_message(&s, &ep).await?;
    let body = serde_json::to_string(&attempt)?;
    // Twice in one batch (at once) and once more after: one attempt.
    let record = |id: &str| ReceivedMessage { id: id.into(), receipt_handle: id.into(), body: body.clone() };
    let batch = [record("m1"), record("m2")];
    let response = handle_webhooks_batch(&s.app.store, &s.app.app.webhooks, &batch).await;
    assert_eq!(response, SqsBatchResponse::default(), "neither is a failure");
    let response = handle_webhooks_batch(&s.app.store, &s.app.app.webhooks, &[record("m3")]).await;
    assert_eq!(response, SqsBatchResponse::default());
    // And twice on the real queue, consumed in-process.
    let queue = s.app.store.webhooks_queue()?;
    queue.send_json(&attempt).await?;
    queue.send_json(&attempt).await?;
    s.app.drained().await?;
    assert_eq!(receiver.received().len(), 1);
    let found = messages(&s.app, &s.tenant.key, &ep).await?;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["attempts"].as_array().map(Vec::len), Some(1), "{found:?}");
    assert_eq!(found[0]["status"], "succeeded");
    Ok(())
}

#[tokio::test]
async fn a_malformed_or_unknown_webhooks_message_is_dropped_or_retried() -> R {
    let s = setup(json!({})).await?;
    let record = |id: &str, body: &str| ReceivedMessage {
        id: id.into(),
        receipt_handle: id.into(),
        body: body.into(),
    };
    let batch = [record("bad", "not json"), record("later", r#"{"kind":"from_a_newer_build"}"#)];
    let response = handle_webhooks_batch(&s.app.store, &s.app.app.webhooks, &batch).await;
    assert!(!response.failed("bad") && response.failed("later"), "{response:?}");
    Ok(())
}

#[tokio::test]
async fn an_endpoint_not_subscribed_to_the_type_and_another_projects_endpoint_get_nothing() -> R {
    let s = setup(json!({})).await?;
    let (wanted, filtered, foreign) =
        (Receiver::start().await, Receiver::start().await, Receiver::start().await);
    endpoint(&s.app, &s.tenant.key, &wanted.url, json!(["session.idled"])).await?;
    let (filtered_ep, _) = endpoint(&s.app, &s.tenant.key, &filtered.url, json!(["budget.reached"])).await?;
    let other = s.app.tenant().await?;
    let (foreign_ep, _) = endpoint(&s.app, &other.key, &foreign.url, json!([])).await?;
    s.model.push(Reply::text("hello"));
    turn(&s, "hi").await?;
    assert_eq!(wanted.wait_for(1).await.len(), 1);
    s.app.drained().await?;
    assert!(filtered.received().is_empty(), "not subscribed to session.idled");
    assert!(foreign.received().is_empty(), "another project's endpoint");
    assert!(messages(&s.app, &s.tenant.key, &filtered_ep).await?.is_empty());
    assert!(messages(&s.app, &other.key, &foreign_ep).await?.is_empty());
    // This project's key cannot read the other project's endpoint's messages.
    let (status, _) =
        send(s.app.client(&s.tenant.key, Method::GET, &format!("/webhooks/{foreign_ep}/messages"))).await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    Ok(())
}

#[tokio::test]
async fn a_tenant_wide_endpoint_receives_the_events_of_every_project_of_the_tenant_and_no_other() -> R {
    let s = setup(json!({})).await?;
    let (status, tenant) =
        send(s.app.core(Method::POST, "/core/v1/tenants").json(&json!({"name": "hooked"}))).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{tenant}");
    let tenant = str_field(&tenant, "id")?;
    let sibling = s.app.tenant().await?;
    let sibling_agent = s
        .app
        .create_agent(&sibling.key, json!({"name": "sibling", "model": "gpt-4o-mini", "tools": ["add"]}))
        .await?;
    let lone = s.app.tenant().await?;
    let lone_agent = s
        .app
        .create_agent(&lone.key, json!({"name": "lone", "model": "gpt-4o-mini", "tools": ["add"]}))
        .await?;
    for p in [&s.tenant.project_id, &sibling.project_id] {
        let (status, body) =
            send(s.app.core(Method::PUT, &format!("/core/v1/tenants/{tenant}/projects/{p}"))).await?;
        anyhow::ensure!(status == StatusCode::OK, "{body}");
    }
    let receiver = Receiver::start().await;
    let (status, created) = send(
        s.app
            .core(Method::POST, &format!("/core/v1/tenants/{tenant}/webhooks"))
            .json(&json!({"url": receiver.url, "eventTypes": ["session.idled"]})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{created}");
    let (ep, secret) = (str_field(&created, "id")?, str_field(&created, "secret")?);

    // Neither project has an endpoint of its own: their turns emit for the tenant's.
    s.model.push(Reply::text("one"));
    turn(&s, "hi").await?;
    s.model.push(Reply::text("two"));
    let (status, body) = send(
        s.app
            .client(&sibling.key, Method::POST, "/responses")
            .json(&json!({"agent": sibling_agent, "input": "hi"})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::OK, "{body}");
    let got = receiver.wait_for(2).await;
    assert_eq!(got.len(), 2, "{got:?}");
    let mut projects: Vec<String> = got
        .iter()
        .map(|r| body_json(r)["data"]["projectId"].as_str().unwrap_or_default().to_owned())
        .collect();
    projects.sort();
    let mut expected = vec![s.tenant.project_id.clone(), sibling.project_id.clone()];
    expected.sort();
    assert_eq!(projects, expected);
    for r in &got {
        assert_eq!(verify(&secret, r), "ok");
        assert_eq!(body_json(r)["type"], "session.idled");
    }
    // A project outside the tenant: nothing reaches the tenant's endpoint.
    s.model.push(Reply::text("three"));
    let (status, body) = send(
        s.app
            .client(&lone.key, Method::POST, "/responses")
            .json(&json!({"agent": lone_agent, "input": "hi"})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::OK, "{body}");
    s.app.drained().await?;
    assert_eq!(receiver.received().len(), 2, "a project outside the tenant");
    // Core reads the messages and attempts; redelivery keeps the id.
    let path = format!("/core/v1/tenants/{tenant}/webhooks/{ep}/messages");
    let started = Instant::now();
    let listed = loop {
        let (status, listed) = send(s.app.core(Method::GET, &path)).await?;
        anyhow::ensure!(status == StatusCode::OK, "{listed}");
        let done = listed["data"]
            .as_array()
            .is_some_and(|d| d.len() == 2 && d.iter().all(|m| m["status"] == "succeeded"));
        if done || started.elapsed() > Duration::from_secs(10) {
            break listed;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(listed["data"].as_array().map(Vec::len), Some(2), "{listed}");
    let first = str_field(&listed["data"][0], "id")?;
    let (status, again) =
        send(s.app.core(
            Method::POST,
            &format!("/core/v1/tenants/{tenant}/webhooks/{ep}/messages/{first}/redeliver"),
        ))
        .await?;
    assert_eq!((status, again["statusCode"].clone()), (StatusCode::OK, json!(200)), "{again}");
    let got = receiver.wait_for(3).await;
    assert_eq!(header(&got[2], "webhook-id"), first);
    Ok(())
}

#[tokio::test]
async fn an_event_whose_queue_send_failed_is_delivered_by_the_retry_job() -> R {
    // A store without the webhooks queue: every send fails (and no consumer runs), as when SQS
    // refuses the send after the turn's transaction committed.
    let mut store = fresh_store().await?;
    store.webhooks_queue = None;
    let s = setup_on(store, Duration::from_secs(1), SCALE, json!({})).await?;
    let receiver = Receiver::start().await;
    let (ep, secret) = endpoint(&s.app, &s.tenant.key, &receiver.url, json!([])).await?;
    s.model.push(Reply::text("hello"));
    let started = Instant::now();
    turn(&s, "hi").await?;
    let project = s.tenant.project_id.parse()?;
    let unsent = s.app.store.webhooks().unsent_events(agentplane_api::edge::now(), 10).await?;
    assert_eq!(unsent.len(), 1, "the event was written with the turn's end: {unsent:?}");
    assert_eq!(unsent[0].project_id, project);
    let got = receiver.wait_for(1).await;
    assert_eq!(got.len(), 1, "the retry job fanned it out and made the attempt");
    assert!(started.elapsed() >= Duration::from_secs(1), "not before the queue's grace");
    assert_eq!(verify(&secret, &got[0]), "ok");
    assert_eq!(body_json(&got[0])["type"], "session.idled");
    let message = settled(&s.app, &s.tenant.key, &ep).await?;
    assert_eq!(message["status"], "succeeded");
    assert!(s.app.store.webhooks().unsent_events(agentplane_api::edge::now(), 10).await?.is_empty());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.received().len(), 1);
    Ok(())
}

#[tokio::test]
async fn cancelling_a_paused_turn_delivers_session_idled() -> R {
    let s = setup(json!({"humanInTheLoop": {"tool_approvals": ["add"]}})).await?;
    let receiver = Receiver::start().await;
    endpoint(&s.app, &s.tenant.key, &receiver.url, json!(["session.idled"])).await?;
    s.model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    let paused = turn(&s, "add").await?;
    assert_eq!(paused["status"], "requires_action", "{paused}");
    let session = str_field(&paused, "session_id")?;
    let (status, body) = send(
        s.app.client(&s.tenant.key, Method::POST, &format!("/sessions/{session}/cancel")).json(&json!({})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let got = receiver.wait_for(1).await;
    assert_eq!(got.len(), 1);
    let body = body_json(&got[0]);
    assert_eq!(body["type"], "session.idled");
    assert_eq!(body["data"]["sessionId"], session);
    assert_eq!(body["data"]["stopReason"], "cancelled");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 1);
    Ok(())
}

#[tokio::test]
async fn after_the_eighth_failed_attempt_the_message_is_failed() -> R {
    // The whole schedule (about 41.6 h) in about 1.5 s.
    let s = setup_on(fresh_store().await?, Duration::from_secs(60), 0.000_01, json!({})).await?;
    let receiver = Receiver::start().await;
    receiver.answer(&[500; 20]);
    let (ep, _) = endpoint(&s.app, &s.tenant.key, &receiver.url, json!([])).await?;
    s.model.push(Reply::text("hello"));
    turn(&s, "hi").await?;
    let message = settled(&s.app, &s.tenant.key, &ep).await?;
    assert_eq!(message["status"], "failed", "{message}");
    assert_eq!(message["attempts"].as_array().map(Vec::len), Some(8), "{message}");
    assert_eq!(message["nextAttemptAt"], Value::Null);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.received().len(), 8, "no ninth attempt");
    Ok(())
}

#[tokio::test]
async fn a_deleted_endpoints_due_messages_leave_the_due_index() -> R {
    let s = setup(json!({})).await?;
    let receiver = Receiver::start().await;
    let (ep, _) = endpoint(&s.app, &s.tenant.key, &receiver.url, json!([])).await?;
    let project = s.tenant.project_id.parse()?;
    let now = agentplane_api::edge::now();
    let event = OutboxEvent::new(MessageId::from_random([9; 12]), project, "session.idled", &json!({}), now);
    // Due in an hour (the in-process retry job never sees it due); the pass below runs then.
    let later = now.plus_seconds(3600);
    let endpoints = s.app.store.webhooks().all(&agentplane_domain::webhook::Owner::Project(project)).await?;
    s.app.store.webhooks().create_messages(&event, &endpoints, later).await?;
    let (status, _) = send(s.app.client(&s.tenant.key, Method::DELETE, &format!("/webhooks/{ep}"))).await?;
    assert_eq!(status, StatusCode::OK);
    let hooks = s.app.store.webhooks();
    assert_eq!(hooks.due_messages(later, 10).await?.len(), 1);
    let pass_at = later.plus_seconds(1);
    let report =
        agentplane_engine::webhooks::delivery::retry_once(&s.app.store, &s.app.app.webhooks, pass_at).await?;
    assert_eq!((report.due, report.attempted, report.skipped), (1, 0, 1), "{report:?}");
    assert!(hooks.due_messages(pass_at, 10).await?.is_empty(), "it left the due index");
    assert!(receiver.received().is_empty());
    Ok(())
}

#[tokio::test]
async fn a_background_run_delivers_agent_run_queued_then_succeeded() -> R {
    let s = setup(json!({"execution": {"background_enabled": true}})).await?;
    let receiver = Receiver::start().await;
    let types = json!(["agent_run.queued", "agent_run.succeeded", "agent_run.canceled"]);
    let (_, secret) = endpoint(&s.app, &s.tenant.key, &receiver.url, types).await?;
    s.model.push(Reply::text("done"));
    let (status, queued) = send(
        s.app
            .client(&s.tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": s.agent, "input": "go", "background": true})),
    )
    .await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    let run = str_field(&queued, "id")?;
    let got = receiver.wait_for(2).await;
    assert_eq!(got.len(), 2, "{got:?}");
    let mut bodies: Vec<Value> = got.iter().map(body_json).collect();
    bodies.sort_by_key(|b| b["type"] != "agent_run.queued");
    assert_eq!(bodies[0]["type"], "agent_run.queued");
    assert_eq!(bodies[1]["type"], "agent_run.succeeded");
    for (r, body) in got.iter().zip(&bodies) {
        assert_eq!(verify(&secret, r), "ok");
        assert_eq!(body["data"]["runId"], run.as_str(), "{body}");
    }
    assert_eq!(bodies[1]["data"]["status"], "succeeded");
    assert_eq!(bodies[1]["data"]["outputText"], "done");
    assert_eq!(bodies[1]["data"]["sessionId"], queued["session_id"]);
    // session.idled is not subscribed: nothing else arrives.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.received().len(), 2);
    Ok(())
}

#[tokio::test]
async fn a_background_runs_callback_is_a_signed_delivery_retried_like_any_message() -> R {
    let s = setup(json!({"execution": {"background_enabled": true}})).await?;
    let receiver = Receiver::start().await;
    let rotate = |overlap: Value| {
        s.app.client(&s.tenant.key, Method::POST, "/callback_secret").json(&json!({"overlapHours": overlap}))
    };
    let (status, first) = send(rotate(json!(24))).await?;
    assert_eq!(status, StatusCode::OK, "{first}");
    let first_secret = str_field(&first, "secret")?;
    assert!(first_secret.starts_with("whsec_"), "{first}");
    let run_with_callback = |input: &'static str| {
        s.app.client(&s.tenant.key, Method::POST, "/responses").json(
            &json!({"agent": s.agent, "input": input, "background": true, "callback_url": receiver.url}),
        )
    };

    // The receiver fails the first attempt: the callback is retried with the same id.
    receiver.answer(&[500]);
    s.model.push(Reply::text("done"));
    let (status, queued) = send(run_with_callback("go")).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    let got = receiver.wait_for(2).await;
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(header(&got[0], "webhook-id"), header(&got[1], "webhook-id"));
    let body = body_json(&got[1]);
    assert_eq!(body["type"], "agent_run.succeeded");
    assert_eq!(body["data"]["runId"], queued["id"]);
    assert_eq!(body["data"]["outputText"], "done");
    assert_eq!(verify(&first_secret, &got[1]), "ok");
    assert!(verify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", &got[1]).starts_with("fail"));

    // Rotated with no overlap: the next callback is signed by the new secret only.
    let (status, second) = send(rotate(json!(0))).await?;
    assert_eq!(status, StatusCode::OK, "{second}");
    let second_secret = str_field(&second, "secret")?;
    s.model.push(Reply::text("again"));
    let (status, _) = send(run_with_callback("more")).await?;
    assert_eq!(status, StatusCode::ACCEPTED);
    let got = receiver.wait_for(3).await;
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(verify(&second_secret, &got[2]), "ok");
    assert!(verify(&first_secret, &got[2]).starts_with("fail"));

    // The signer is no endpoint of the project: not listed, not found, not deletable.
    let (_, list) = send(s.app.client(&s.tenant.key, Method::GET, "/webhooks")).await?;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(0), "{list}");
    let signer = agentplane_domain::webhook::callback_signer_id(&s.tenant.project_id.parse()?);
    for method in [Method::GET, Method::DELETE] {
        let (status, body) =
            send(s.app.client(&s.tenant.key, method, &format!("/webhooks/{signer}"))).await?;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    }
    let (status, body) = send(rotate(json!(500))).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    Ok(())
}
