//! Streamed turns (`POST /responses` with `stream: true`): how long after the model's first piece
//! of text the first `response.output_text.delta` reaches the caller, and the time to that first
//! delta from the request. The scripted model streams its answer a word every 10 ms.

use std::time::{Duration, Instant};

use agentplane_tests::TestApp;
use agentplane_tests::model::{Reply, ScriptedModel};
use reqwest::Method;
use serde_json::json;

use crate::stats::{ms, stats};

pub async fn run(n: usize) -> anyhow::Result<()> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(&tenant.key, json!({"name": "bench", "model": "gpt-4o-mini", "instructions": "hi"}))
        .await?;
    let turns = n.min(200);
    let mut after_model = Vec::with_capacity(turns);
    let mut from_request = Vec::with_capacity(turns);
    for i in 0..turns.min(10) + turns {
        model.push(Reply::text("one two three four five"));
        let started = Instant::now();
        let request = json!({"agent": agent, "input": "hi", "stream": true});
        let mut response = app.client(&tenant.key, Method::POST, "/responses").json(&request).send().await?;
        let mut buffer = String::new();
        let mut first = None;
        while let Some(chunk) = tokio::time::timeout(Duration::from_secs(10), response.chunk()).await?? {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            if first.is_none() && buffer.contains("event: response.output_text.delta") {
                first = Some(Instant::now());
            }
        }
        let (Some(first), Some(piece)) = (first, model.first_pieces().last().copied()) else {
            anyhow::bail!("no text delta in the stream: {buffer}");
        };
        if i >= turns.min(10) {
            after_model.push(first.saturating_duration_since(piece));
            from_request.push(first.saturating_duration_since(started));
        }
    }
    let after_model = stats(after_model);
    let from_request = stats(from_request);
    println!("Streamed turns: {turns} turns (stream: true), the model streaming a word every 10 ms");
    println!("{:<52} {:>9} {:>9}", "measure", "p50 ms", "p99 ms");
    println!(
        "{:<52} {:>9.2} {:>9.2}",
        "first text delta after the model's first piece",
        ms(after_model.p50),
        ms(after_model.p99)
    );
    println!(
        "{:<52} {:>9.2} {:>9.2}",
        "first text delta after the request (new session)",
        ms(from_request.p50),
        ms(from_request.p99)
    );
    Ok(())
}
