//! Background runs: end-to-end throughput with an instantly answering model at 10 runs in
//! flight (submit → `succeeded`, polled), and the queue-to-start latency (the run's stored
//! `created_at` to its `started_at`, milliseconds) p50/p99.

use std::time::{Duration, Instant};

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::stats::{ms, stats};

pub async fn run(n: usize) -> anyhow::Result<()> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "bench", "model": "gpt-4o-mini", "config": {"execution": {"background_enabled": true}}}),
        )
        .await?;
    let total = n.clamp(20, 200);
    for _ in 0..total {
        model.push(Reply::text("ok"));
    }
    let in_flight = 10;
    let started = Instant::now();
    let per_worker = total / in_flight;
    let workers = (0..in_flight).map(|_| {
        let (app, key, agent) = (&app, tenant.key.clone(), agent.clone());
        async move {
            let mut ids = Vec::new();
            for _ in 0..per_worker {
                let (status, body) = send(
                    app.client(&key, Method::POST, "/responses")
                        .json(&json!({"agent": agent, "input": "go", "background": true})),
                )
                .await?;
                anyhow::ensure!(status == StatusCode::ACCEPTED, "{status} {body}");
                let id = str_field(&body, "id")?;
                loop {
                    let (_, run) = send(app.client(&key, Method::GET, &format!("/runs/{id}"))).await?;
                    if run["status"] == "succeeded" {
                        break;
                    }
                    anyhow::ensure!(run["status"] != "failed", "{run}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                ids.push(id);
            }
            anyhow::Ok(ids)
        }
    });
    let ids: Vec<String> = futures_util::future::try_join_all(workers).await?.into_iter().flatten().collect();
    let elapsed = started.elapsed();
    let project: agentplane_domain::ProjectId = tenant.project_id.parse()?;
    let mut waits = Vec::with_capacity(ids.len());
    for id in &ids {
        let run = app.store.agent_runs().get(&project, &id.parse()?).await?;
        if let Some(at) = run.started_at {
            let millis = u64::try_from(at.unix_millis() - run.created_at.unix_millis()).unwrap_or(0);
            waits.push(Duration::from_millis(millis));
        }
    }
    let wait = stats(waits);
    println!("background runs ({} runs, {in_flight} in flight, instant model)", ids.len());
    println!(
        "  throughput end to end: {:.1} runs/s ({:.1} s in all)",
        ids.len() as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    println!("  queue to start: p50 {:.0} ms, p99 {:.0} ms", ms(wait.p50), ms(wait.p99));
    Ok(())
}
