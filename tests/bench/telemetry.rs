//! The telemetry bench (`bash tests/bench.sh telemetry`), against LocalStack:
//! - a 24 h Runtime history read at max_points 1000 over a Session with a full day of 30 s
//!   samples (2880), through the full router over loopback HTTP and the admin client's checks:
//!   latency, and the DynamoDB items and requests one read takes;
//! - one sampler pass over 1,000 live allocations: time, samples written, and a second pass in
//!   the same interval (which writes nothing).

#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use agentplane_admin_client::{AdminClient, RuntimeHistoryRequest};
use agentplane_api::edge;
use agentplane_domain::sandbox::SandboxId;
use agentplane_domain::session::{EnvironmentMode, NewSession};
use agentplane_domain::telemetry::{
    AllocationId, AllocationRecord, AllocationState, ComputeStart, EnvironmentId, RuntimeSample,
    SampleAllocation, SampleReadings, SampleStatus, SandboxCounters, TokenUsage,
};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use agentplane_engine::runtime::{LOCAL_PROVIDER, RuntimeTelemetry, sample_once};
use agentplane_store::{Allocation, Store};
use agentplane_tests::{TestApp, send, str_field};
use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::json;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn pct(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * q).round() as usize]
}

async fn in_chunks<F, Fut>(n: usize, op: F) -> anyhow::Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    for chunk in (0..n).collect::<Vec<_>>().chunks(50) {
        for result in join_all(chunk.iter().map(|i| op(*i))).await {
            result?;
        }
    }
    Ok(())
}

fn random_bytes() -> anyhow::Result<[u8; 16]> {
    Ok(edge::random()?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::var("BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    println!("Agentplane telemetry bench (LocalStack DynamoDB)");

    // A full day of 30 s samples for one managed Session.
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/sessions")
            .json(&json!({"environment_mode": "openai_hosted"})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {body}");
    let project: ProjectId = tenant.project_id.parse()?;
    let session: SessionId = str_field(&body, "id")?.parse()?;
    let allocation = app
        .store
        .allocations()
        .get(&project, &session)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no allocation"))?;
    let now = edge::now().unix_seconds();
    let start = now - 86_400 - now.rem_euclid(30);
    let alloc = SampleAllocation {
        allocation_id: allocation.record.allocation_id,
        environment_id: allocation.environment_id,
        provider_type: allocation.record.provider_type.clone(),
        compute_started_at: ComputeStart::new(start - 10, 0),
    };
    let seeding = Instant::now();
    let telemetry = app.store.telemetry();
    in_chunks(2880, |i| {
        let at = start + 30 * i as i64 + 1;
        let sample = RuntimeSample {
            sampled_at: Timestamp::from_unix_seconds(at),
            allocation: Some(alloc.clone()),
            status: SampleStatus::Observed {
                readings: SampleReadings {
                    cpu_seconds_total: Some(6.0 * i as f64),
                    capacity_cores: Some(2.0),
                    memory_usage_bytes: Some(512 << 20),
                    memory_limit_bytes: Some(2 << 30),
                    ..SampleReadings::default()
                },
            },
            token_usage: Some(TokenUsage { input_tokens: i as u64 * 10, output_tokens: i as u64 }),
        };
        let telemetry = &telemetry;
        async move {
            telemetry.put_sample(&session, at - at.rem_euclid(30), &sample).await?;
            Ok(())
        }
    })
    .await?;
    println!("seeded 2880 samples in {:.1} s", seeding.elapsed().as_secs_f64());

    let client = AdminClient::new(&app.base, &app.core_key);
    let request = RuntimeHistoryRequest { start, end: start + 86_400, max_points: Some(1000) };
    let mut latencies = Vec::with_capacity(n);
    let mut points = 0;
    for i in 0..n + 3 {
        let began = Instant::now();
        let history = client.retrieve_runtime_history(project, session, request).await?;
        if i >= 3 {
            latencies.push(began.elapsed()); // the first three warm up
        }
        points =
            history.coverage.buckets.len() + history.series.iter().map(|s| s.points.len()).sum::<usize>();
        anyhow::ensure!(
            history.coverage.sample_count == 2880,
            "read {} samples",
            history.coverage.sample_count
        );
    }
    let read = app.store.telemetry().samples(&session, start - 60, start + 86_400).await?;
    let mut raw = Vec::with_capacity(n);
    for _ in 0..n {
        let began = Instant::now();
        app.store.telemetry().samples(&session, start - 60, start + 86_400).await?;
        raw.push(began.elapsed());
    }
    println!(
        "24 h history, max_points 1000, 2880 samples: p50 {:.1} ms, p99 {:.1} ms over {n} reads \
         (HTTP + admin client checks); {points} coverage+series points",
        ms(pct(&mut latencies, 0.5)),
        ms(pct(&mut latencies, 0.99)),
    );
    println!(
        "  DynamoDB per read: {} items read in {} Query requests; the Query alone: p50 {:.1} ms",
        read.items_read,
        read.requests,
        ms(pct(&mut raw, 0.5)),
    );

    // 1,000 live allocations, each with a Session and fresh sandbox counters.
    let store: &Store = &app.store;
    let setup = Instant::now();
    let reported_at = edge::now();
    in_chunks(1000, |i| async move {
        let id = SessionId::from_random(random_bytes()?);
        let mut session =
            NewSession { environment_mode: EnvironmentMode::OpenaiHosted, ..NewSession::default() }
                .into_session(id, project, edge::now());
        let environment_id = EnvironmentId::from_random(random_bytes()?);
        session.environment_id = Some(environment_id);
        store.sessions().create(&session).await?;
        let allocation = Allocation {
            project_id: project,
            session_id: id,
            environment_id,
            record: AllocationRecord {
                allocation_id: AllocationId::from_random(random_bytes()?),
                device_id: None,
                provider_type: LOCAL_PROVIDER.to_owned(),
                state: AllocationState::Pending,
                created_at: session.created_at,
            },
            sandbox_id: None,
            updated_at: session.created_at,
        };
        store.allocations().create(&allocation).await?;
        let sandbox = SandboxId::from_random(random_bytes()?);
        store.allocations().activate(&project, &id, &sandbox, None, None, edge::now()).await?;
        store
            .telemetry()
            .put_sandbox_counters(&SandboxCounters {
                sandbox_id: sandbox.to_string(),
                cpu_seconds_total: Some(i as f64),
                memory_usage_bytes: Some(1 << 28),
                memory_limit_bytes: Some(1 << 30),
                capacity_cores: Some(1.0),
                compute_started_at: ComputeStart::new(reported_at.unix_seconds() - 60, 0),
                running: true,
                reported_at,
            })
            .await?;
        Ok(())
    })
    .await?;
    println!("set up 1000 live allocations in {:.1} s", setup.elapsed().as_secs_f64());

    // Plus the day-of-samples Session's own allocation (pending): 1001 live in all.
    let runtime = RuntimeTelemetry::from_env(store);
    let real = edge::now().unix_seconds();
    let at = Timestamp::from_unix_seconds(real - real.rem_euclid(30) + 1);
    let began = Instant::now();
    let first = sample_once(store, &runtime, at).await?;
    let pass = began.elapsed();
    let began = Instant::now();
    let second = sample_once(store, &runtime, at.plus_seconds(1)).await?;
    let repeat = began.elapsed();
    println!(
        "sampler pass over {} live allocations: {:.0} ms, {} samples written ({} observed, {} unavailable, {} failed); \
         DynamoDB: 1 index listing + {} BatchGetItem session reads + {} BatchGetItem usage reads + {} \
         TransactWriteItems of up to 100 conditional puts",
        first.allocations,
        ms(pass),
        first.written,
        first.observed,
        first.unavailable,
        first.failed,
        first.allocations.div_ceil(100),
        first.observed.div_ceil(100),
        first.allocations.div_ceil(100),
    );
    println!(
        "a second pass in the same interval: {:.0} ms, {} written, {} already sampled",
        ms(repeat),
        second.written,
        second.duplicates
    );
    Ok(())
}
