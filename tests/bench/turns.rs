//! Turns and the event log: storage round trips per plain turn, turn overhead against a model
//! that answers at once (each turn minus its own model call, then percentiles), the same for the
//! first and the last ten of 100 turns in one session, event append throughput, and SSE
//! delivery latency from append to receipt.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentplane_domain::event::{EventType, NewEvent};
use agentplane_domain::{SessionId, Timestamp};
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, send, str_field};
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::round_trips;
use crate::stats::{measure, ms, stats};

pub async fn run(n: usize) -> anyhow::Result<()> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(&tenant.key, json!({"name": "bench", "model": "gpt-4o-mini", "instructions": "hi"}))
        .await?;
    let turns = n.min(200);

    // The model's own time: the same completion request straight to the scripted server.
    let http = reqwest::Client::new();
    let model_url = format!("{}/chat/completions", model.base_url);
    let model_time = measure(turns, |_| {
        model.push(Reply::text("ok"));
        let request = http
            .post(&model_url)
            .json(&json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}));
        async move {
            request.send().await?.error_for_status()?;
            Ok(())
        }
    })
    .await?;
    // Each turn timed, and its own model call as the model timed it: the overhead is computed
    // per turn, then its percentiles taken (the p99 of a difference is not a difference of p99s).
    let mut turn_samples = Vec::with_capacity(turns);
    let mut overhead_samples = Vec::with_capacity(turns);
    for i in 0..turns.min(20) + turns {
        model.push(Reply::text("ok"));
        let request =
            app.client(&tenant.key, Method::POST, "/responses").json(&json!({"agent": agent, "input": "hi"}));
        let (took, model_took) = timed_turn(&model, request).await?;
        if i >= turns.min(20) {
            turn_samples.push(took);
            overhead_samples.push(took.saturating_sub(model_took));
        }
    }
    let turn = stats(turn_samples);
    let turn_overhead = stats(overhead_samples);

    // One session, 100 turns through one route: the first ten against the last ten.
    let session_turns = one_session(&app, &tenant.key, &agent, &model).await?;
    let first = stats(session_turns[..10].iter().map(|t| t.0).collect());
    let last = stats(session_turns[90..].iter().map(|t| t.0).collect());
    let first_overhead = stats(session_turns[..10].iter().map(|t| t.0.saturating_sub(t.1)).collect());
    let last_overhead = stats(session_turns[90..].iter().map(|t| t.0.saturating_sub(t.1)).collect());

    let rows = round_trips::count(&model).await?;

    // One bare storage call of each kind a turn makes, for scale: a turn's overhead is about its
    // round trips times these.
    let (dynamo, table) = (app.store.dynamo.clone(), app.store.names.main_table.clone());
    let pk = format!("BENCH#{}", uuid::Uuid::new_v4());
    let item = |sk: String| {
        Put::builder()
            .table_name(&table)
            .item("PK", AttributeValue::S(pk.clone()))
            .item("SK", AttributeValue::S(sk))
            .build()
    };
    let transact = measure(turns, |i| {
        let puts = [item(format!("A#{i}")), item(format!("B#{i}"))];
        let request = dynamo.transact_write_items();
        async move {
            let mut request = request;
            for put in puts {
                request = request.transact_items(TransactWriteItem::builder().put(put?).build());
            }
            request.send().await?;
            Ok(())
        }
    })
    .await?;
    let get = measure(turns, |i| {
        let request = dynamo
            .get_item()
            .table_name(&table)
            .key("PK", AttributeValue::S(pk.clone()))
            .key("SK", AttributeValue::S(format!("A#{i}")))
            .consistent_read(true);
        async move {
            request.send().await?;
            Ok(())
        }
    })
    .await?;

    // Append throughput: one writer, then eight writers on one session.
    let bus = app.app.bus.clone();
    let store = app.store.clone();
    let appends = n.max(100);
    let session = SessionId::from_random(*uuid::Uuid::new_v4().as_bytes());
    let started = Instant::now();
    for i in 0..appends {
        let event = NewEvent::new(EventType::Usage, None, json!({ "i": i }));
        bus.append(&store, &session, vec![event], Timestamp::from_unix_millis(0)).await?;
    }
    let sequential = appends as f64 / started.elapsed().as_secs_f64();
    let session = SessionId::from_random(*uuid::Uuid::new_v4().as_bytes());
    let started = Instant::now();
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (bus, store) = (bus.clone(), store.clone());
            tokio::spawn(async move {
                for i in 0..appends / 8 {
                    let event = NewEvent::new(EventType::Usage, None, json!({ "w": w, "i": i }));
                    bus.append(&store, &session, vec![event], Timestamp::from_unix_millis(0)).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for writer in writers {
        writer.await??;
    }
    let concurrent = (appends / 8 * 8) as f64 / started.elapsed().as_secs_f64();
    let gapless = store.events().last_seq(&session).await? == (appends / 8 * 8) as u64;

    // SSE delivery: append with a timestamp, measure until the client has the frame.
    let (_, created) = send(app.client(&tenant.key, Method::POST, "/sessions")).await?;
    let sse_session: SessionId = str_field(&created, "id")?.parse()?;
    let mut response = app
        .client(&tenant.key, Method::GET, &format!("/sessions/{sse_session}/events/stream"))
        .send()
        .await?;
    let sent: Arc<std::sync::Mutex<Vec<Instant>>> = Arc::default();
    let deliveries = n.min(200);
    let appender = {
        let (bus, store, sent) = (bus.clone(), store.clone(), sent.clone());
        tokio::spawn(async move {
            for i in 0..deliveries {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if let Ok(mut s) = sent.lock() {
                    s.push(Instant::now());
                }
                let event = NewEvent::new(EventType::Usage, None, json!({ "i": i }));
                bus.append(&store, &sse_session, vec![event], Timestamp::from_unix_millis(0)).await?;
            }
            anyhow::Ok(())
        })
    };
    let mut received = Vec::with_capacity(deliveries);
    let mut buffer = String::new();
    while received.len() < deliveries {
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk()).await??;
        let Some(chunk) = chunk else { anyhow::bail!("the stream ended") };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            if frame.starts_with("id: ") {
                received.push(Instant::now());
            }
        }
    }
    appender.await??;
    let sent = sent.lock().map(|s| s.clone()).unwrap_or_default();
    let latency = stats(sent.iter().zip(&received).map(|(s, r)| r.saturating_duration_since(*s)).collect());

    println!("Turns and events: {turns} turns, {appends} appends, {deliveries} SSE deliveries");
    println!("{:<44} {:>9} {:>9}", "measure", "p50 ms", "p99 ms");
    println!("{:<44} {:>9.2} {:>9.2}", "turn (POST /responses, new session)", ms(turn.p50), ms(turn.p99));
    println!(
        "{:<44} {:>9.2} {:>9.2}",
        "model call alone (scripted, instant)",
        ms(model_time.p50),
        ms(model_time.p99)
    );
    println!(
        "{:<44} {:>9.2} {:>9.2}",
        "turn overhead (each turn - its model call)",
        ms(turn_overhead.p50),
        ms(turn_overhead.p99)
    );
    println!(
        "{:<44} {:>9.2} {:>9.2}",
        "one session, turns 1-10 (/sessions/{id}/...)",
        ms(first.p50),
        ms(first.p99)
    );
    println!("{:<44} {:>9.2} {:>9.2}", "one session, turns 91-100", ms(last.p50), ms(last.p99));
    println!(
        "{:<44} {:>9.2} {:>9.2}",
        "one session, turns 1-10 overhead",
        ms(first_overhead.p50),
        ms(first_overhead.p99)
    );
    println!(
        "{:<44} {:>9.2} {:>9.2}",
        "one session, turns 91-100 overhead",
        ms(last_overhead.p50),
        ms(last_overhead.p99)
    );
    println!("{:<44} {:>9.2} {:>9.2}", "bare GetItem (consistent), for scale", ms(get.p50), ms(get.p99));
    println!(
        "{:<44} {:>9.2} {:>9.2}",
        "bare TransactWriteItems (2 puts), for scale",
        ms(transact.p50),
        ms(transact.p99)
    );
    println!(
        "{:<44} {:>9.2} {:>9.2}",
        "SSE delivery, append start to client receipt",
        ms(latency.p50),
        ms(latency.p99)
    );
    println!("event appends, 1 writer:  {sequential:>8.0} events/s");
    println!("event appends, 8 writers: {concurrent:>8.0} events/s (gapless: {gapless})");
    println!("(overhead: each turn's time minus its own model call as the scripted model timed it)");
    println!();
    round_trips::print(&rows);
    Ok(())
}

/// One turn: its time as the client saw it, and its model call's time as the model saw it.
async fn timed_turn(
    model: &ScriptedModel,
    request: reqwest::RequestBuilder,
) -> anyhow::Result<(Duration, Duration)> {
    let calls_before = model.call_times().len();
    let start = Instant::now();
    let (status, body) = send(request).await?;
    let took = start.elapsed();
    anyhow::ensure!(status == StatusCode::OK && body["status"] == "completed", "{status} {body}");
    let calls = model.call_times();
    anyhow::ensure!(
        calls.len() == calls_before + 1,
        "one model call per turn, saw {}",
        calls.len() - calls_before
    );
    Ok((took, calls[calls_before]))
}

/// 100 turns of one new session, each `POST /sessions/{id}/messages`: each turn's time and its
/// model call's time.
async fn one_session(
    app: &TestApp,
    key: &str,
    agent: &str,
    model: &ScriptedModel,
) -> anyhow::Result<Vec<(Duration, Duration)>> {
    let (status, created) = send(app.client(key, Method::POST, "/sessions")).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {created}");
    let session = str_field(&created, "id")?;
    let mut turns = Vec::with_capacity(100);
    for _ in 0..100 {
        model.push(Reply::text("ok"));
        let request = app
            .client(key, Method::POST, &format!("/sessions/{session}/messages"))
            .json(&json!({"agent": agent, "input": "hi"}));
        turns.push(timed_turn(model, request).await?);
    }
    Ok(turns)
}
