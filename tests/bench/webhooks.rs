//! Webhook delivery: latency from a state change to the receiver, and deliveries per second to a
//! local receiver at 10 concurrent endpoints. Everything real: LocalStack's DynamoDB and SQS,
//! the in-process `webhook-delivery` consumer (one long-polling loop, batches of 10 run at
//! once), signed HTTP deliveries to a loopback receiver.
//!
//! - "turn answered → received": a real turn (`POST /responses`) ends and emits `session.idled`;
//!   measured from the answer (the commit and the queue send came just before it) to the
//!   receiver's arrival.
//! - "committed → received": one emission committed as a turn commits it (the event in a
//!   `TransactWriteItems`), measured from the commit's return through the queue send, the
//!   fan-out, the first attempt's queue message and the delivery.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentplane_api::App;
use agentplane_domain::webhook::MessageId;
use agentplane_engine::webhooks::{SealKey, WebhookConfig};
use agentplane_store::OutboxEvent;
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, fresh_store, send};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use reqwest::Method;
use serde_json::json;

use crate::stats::{ms, stats};

/// When each delivery arrived, by `webhook-id` and path.
#[derive(Clone, Default)]
struct Arrivals(Arc<Mutex<Vec<(String, String, Instant)>>>);

impl Arrivals {
    fn count(&self) -> usize {
        self.0.lock().map(|v| v.len()).unwrap_or(0)
    }

    fn of(&self, id: &str) -> Option<Instant> {
        self.0.lock().ok()?.iter().find(|(i, _, _)| i == id).map(|(_, _, at)| *at)
    }

    /// Waits for `n` deliveries in all; answers when the last of them arrived (as the receiver
    /// recorded it, not when this poll noticed).
    async fn wait(&self, n: usize, limit: Duration) -> anyhow::Result<Instant> {
        let started = Instant::now();
        while self.count() < n {
            anyhow::ensure!(started.elapsed() < limit, "only {} of {n} deliveries arrived", self.count());
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let got = self.0.lock().map_err(|_| anyhow::anyhow!("arrivals lock poisoned"))?;
        got.iter().take(n).map(|(_, _, at)| *at).max().ok_or_else(|| anyhow::anyhow!("no delivery"))
    }
}

async fn receiver() -> anyhow::Result<(String, Arrivals)> {
    let arrivals = Arrivals::default();
    async fn hook(State(a): State<Arrivals>, Path(path): Path<String>, headers: HeaderMap) -> StatusCode {
        let id = headers.get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        if let Ok(mut got) = a.0.lock() {
            got.push((id, path, Instant::now()));
        }
        StatusCode::NO_CONTENT
    }
    let router = axum::Router::new().route("/{path}", axum::routing::post(hook)).with_state(arrivals.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok((base, arrivals))
}

fn config() -> anyhow::Result<WebhookConfig> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key)?;
    let key = SealKey::from_bytes(&key).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(WebhookConfig::new(Some(Arc::new(key)), agentplane_tests::loopback_receivers()))
}

/// Commits one emission the way a turn's step does and sends it on; when the commit returned.
async fn emit(
    app: &TestApp,
    project: agentplane_domain::ProjectId,
    n: usize,
) -> anyhow::Result<(MessageId, Instant)> {
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes)?;
    let id = MessageId::from_random(bytes);
    let data =
        json!({"projectId": project.to_string(), "sessionId": format!("bench-{n}"), "runtimeStatus": "idle"});
    let event = OutboxEvent::new(id.clone(), project, "session.idled", &data, agentplane_api::edge::now());
    let item = app.store.webhooks().emit_item(&event)?;
    app.store.dynamo.transact_write_items().transact_items(item).send().await?;
    let committed = Instant::now();
    app.store.webhooks().dispatch(std::slice::from_ref(&event)).await?;
    Ok((id, committed))
}

pub async fn run(n: usize) -> anyhow::Result<()> {
    let model = ScriptedModel::start().await?;
    let webhooks = config()?;
    let app =
        TestApp::serve_with_model_and(fresh_store().await?, &model, move |a: App| a.with_webhooks(webhooks))
            .await?;
    let (base, arrivals) = receiver().await?;
    let samples = n.min(100);

    // Latency: one endpoint.
    let tenant = app.tenant().await?;
    let project: agentplane_domain::ProjectId = tenant.project_id.parse()?;
    let agent = app.create_agent(&tenant.key, json!({"name": "bench", "model": "gpt-4o-mini"})).await?;
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, "/webhooks").json(&json!({"url": format!("{base}/one")})))
            .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {body}");
    let mut after_turn = Vec::with_capacity(samples);
    for i in 0..samples + 5 {
        model.push(Reply::text("ok"));
        let before = arrivals.count();
        let request =
            app.client(&tenant.key, Method::POST, "/responses").json(&json!({"agent": agent, "input": "hi"}));
        let (status, body) = send(request).await?;
        anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
        let answered = Instant::now();
        let arrived = arrivals.wait(before + 1, Duration::from_secs(30)).await?;
        if i >= 5 {
            after_turn.push(arrived.saturating_duration_since(answered));
        }
    }
    let mut after_commit = Vec::with_capacity(samples);
    for i in 0..samples + 5 {
        let before = arrivals.count();
        let (id, committed) = emit(&app, project, i).await?;
        arrivals.wait(before + 1, Duration::from_secs(30)).await?;
        let arrived = arrivals.of(id.as_str()).ok_or_else(|| anyhow::anyhow!("no delivery of {id}"))?;
        if i >= 5 {
            after_commit.push(arrived.saturating_duration_since(committed));
        }
    }
    let turned = stats(after_turn);
    let committed = stats(after_commit);

    // Throughput: a second project with 10 endpoints; events emitted at once, 10 deliveries each.
    let other = app.tenant().await?;
    let other_project: agentplane_domain::ProjectId = other.project_id.parse()?;
    for e in 0..10 {
        let (status, body) = send(
            app.client(&other.key, Method::POST, "/webhooks").json(&json!({"url": format!("{base}/ep{e}")})),
        )
        .await?;
        anyhow::ensure!(status == StatusCode::CREATED, "{status} {body}");
    }
    let events = (n / 3).clamp(10, 100);
    let before = arrivals.count();
    let started = Instant::now();
    let emits = (0..events).map(|i| emit(&app, other_project, 10_000 + i));
    for result in futures_util::future::join_all(emits).await {
        result?;
    }
    let done = arrivals.wait(before + events * 10, Duration::from_secs(300)).await?;
    let elapsed = done.duration_since(started);
    let deliveries = events * 10;

    println!("Webhooks: {samples} deliveries measured each way; {deliveries} deliveries to 10 endpoints");
    println!("{:<44} {:>9} {:>9}", "measure", "p50 ms", "p99 ms");
    println!(
        "{:<44} {:>9.2} {:>9.2}",
        "turn answered -> received (session.idled)",
        ms(turned.p50),
        ms(turned.p99)
    );
    println!("{:<44} {:>9.2} {:>9.2}", "committed -> received", ms(committed.p50), ms(committed.p99));
    println!(
        "{:<44} {:>9.1} deliveries/s ({deliveries} in {:.2} s)",
        "10 endpoints, events emitted at once",
        deliveries as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    Ok(())
}
