//! The Core runtime telemetry routes, the managed allocations behind them and the sampler:
//! every error path, isolation between projects, status/reason per mode and lifecycle, the
//! sampler's one-sample-per-allocation-per-interval rule, and history over stored samples. The
//! admin client (which checks every field and rule) reads the real responses.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use agentplane_admin_client::{AdminClient, ListRuntimeObservations, RuntimeHistoryRequest};
use agentplane_api::edge;
use agentplane_domain::page::Order;
use agentplane_domain::sandbox::SandboxId;
use agentplane_domain::telemetry::observation_wire::{InstanceKind, LifecycleState, ObservationStatus};
use agentplane_domain::telemetry::{
    AllocationState, ComputeStart, DeviceId, ProviderRead, Reason, RuntimeSample, SampleAllocation,
    SampleReadings, SampleStatus, SandboxCounters, TokenUsage,
};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use agentplane_engine::runtime::sources::ReadFuture;
use agentplane_engine::runtime::{
    LOCAL_PROVIDER, ObservationSource, ObservationSources, RuntimeTelemetry, SourceReading, sample_once,
};
use agentplane_store::{Allocation, Store};
use agentplane_tests::{Tenant, TestApp, assert_error, send, send_with_cache, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

struct Ids {
    project: ProjectId,
    session: SessionId,
}

async fn session(app: &TestApp, tenant: &Tenant, mode: &str) -> anyhow::Result<Ids> {
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({ "environment_mode": mode })))
            .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "create session: {status} {body}");
    Ok(Ids { project: tenant.project_id.parse()?, session: str_field(&body, "id")?.parse()? })
}

fn admin(app: &TestApp) -> AdminClient {
    AdminClient::new(&app.base, &app.core_key)
}

/// A sandbox id named by `name` (the same name, the same id).
fn sandbox_id(name: &str) -> SandboxId {
    let mut bytes = [0u8; 16];
    for (i, b) in name.bytes().enumerate() {
        bytes[i % 16] ^= b;
    }
    SandboxId::from_random(bytes)
}

/// The sandbox side's part: bind the allocation to a sandbox and mark it running.
async fn activate(store: &Store, ids: &Ids, sandbox: &str) -> anyhow::Result<Allocation> {
    Ok(store
        .allocations()
        .activate(
            &ids.project,
            &ids.session,
            &sandbox_id(sandbox),
            None,
            Some(DeviceId::from_random([7; 16])),
            edge::now(),
        )
        .await?)
}

/// The node's part: report a sandbox's counters.
async fn report(store: &Store, sandbox: &str, at: Timestamp, cpu: f64, running: bool) -> R {
    store
        .telemetry()
        .put_sandbox_counters(&SandboxCounters {
            sandbox_id: sandbox_id(sandbox).to_string(),
            cpu_seconds_total: Some(cpu),
            memory_usage_bytes: Some(805_306_368),
            memory_limit_bytes: Some(2_147_483_648),
            capacity_cores: Some(2.0),
            compute_started_at: ComputeStart::new(at.unix_seconds() - 100, 250_000_000),
            running,
            reported_at: at,
        })
        .await?;
    Ok(())
}

/// A source that answers only after `delay`.
#[derive(Debug)]
struct Slow(Duration);

impl ObservationSource for Slow {
    fn read<'a>(&'a self, _: &'a Allocation, _: Timestamp) -> ReadFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep(self.0).await;
            SourceReading::without_sample(ProviderRead::Unavailable)
        })
    }
}

fn observation_path(project: &impl std::fmt::Display, session: &impl std::fmt::Display) -> String {
    format!("/core/v1/projects/{project}/sessions/{session}/runtime-observation")
}

fn history_path(ids: &Ids, query: &str) -> String {
    format!("/core/v1/projects/{}/sessions/{}/runtime-history?{query}", ids.project, ids.session)
}

#[tokio::test]
async fn runtime_routes_require_the_core_key() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let ids = session(&app, &tenant, "openai_hosted").await?;
    for path in [
        "/core/v1/sandbox/runtime-observations".to_owned(),
        observation_path(&ids.project, &ids.session),
        history_path(&ids, "start=0&end=60"),
    ] {
        let (status, body) = send(app.request(Method::GET, &path)).await?;
        assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_admin_key");
        let (status, body) = send(app.request(Method::GET, &path).bearer_auth(&tenant.key)).await?;
        assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_admin_key");
    }
    Ok(())
}

#[tokio::test]
async fn single_observation_follows_mode_and_lifecycle() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let client = admin(&app);

    let none = session(&app, &tenant, "none").await?;
    let o = client.retrieve_runtime_observation(none.project, none.session).await?;
    assert_eq!(
        (o.status, o.reason),
        (ObservationStatus::Unsupported, Some(Reason::RuntimeModeNotObservable))
    );
    assert_eq!((o.instance.kind, o.environment_id, o.lifecycle_state), (InstanceKind::None, None, None));

    let hosted = session(&app, &tenant, "self_hosted").await?;
    let o = client.retrieve_runtime_observation(hosted.project, hosted.session).await?;
    assert_eq!(o.instance.kind, InstanceKind::SelfHostedConnection);
    assert_eq!(o.status, ObservationStatus::Unsupported);
    assert!(o.environment_id.is_some());

    // openai_hosted: a pending allocation exists from creation on.
    let managed = session(&app, &tenant, "openai_hosted").await?;
    let (status, cache, body) =
        send_with_cache(app.core(Method::GET, &observation_path(&managed.project, &managed.session))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(cache.as_deref(), Some("no-store"));
    assert!(body.get("disk").is_none(), "the single read has no disk: {body}");
    let o = client.retrieve_runtime_observation(managed.project, managed.session).await?;
    assert_eq!(o.lifecycle_state, Some(LifecycleState::Pending));
    assert_eq!(o.reason, Some(Reason::AllocationPending));
    let allocation =
        app.store.allocations().get(&managed.project, &managed.session).await?.expect("allocation");
    assert_eq!(o.instance.allocation_id, Some(allocation.record.allocation_id));
    assert_eq!(allocation.record.provider_type, LOCAL_PROVIDER);
    assert_eq!(o.allocation_created_at, Some(allocation.record.created_at.unix_seconds()));

    // Bound and running, but the node has reported nothing yet.
    activate(&app.store, &managed, "sbx-1").await?;
    let o = client.retrieve_runtime_observation(managed.project, managed.session).await?;
    assert_eq!((o.status, o.reason), (ObservationStatus::Unavailable, Some(Reason::SampleUnavailable)));
    assert_eq!(o.lifecycle_state, Some(LifecycleState::Active));
    assert_eq!(o.provider_type.as_deref(), Some("local"));

    // Fresh counters: observed.
    let now = edge::now();
    report(&app.store, "sbx-1", now, 482.75, true).await?;
    let o = client.retrieve_runtime_observation(managed.project, managed.session).await?;
    assert_eq!((o.status, o.reason), (ObservationStatus::Observed, None));
    assert_eq!(o.observed_at, Some(now.unix_seconds()));
    assert_eq!(o.started_at, Some(now.unix_seconds() - 100));
    let cpu = o.cpu.expect("cpu");
    assert_eq!(
        (cpu.usage_seconds_total, cpu.capacity_cores, cpu.usage_cores),
        (Some(482.75), Some(2.0), None)
    );
    assert_eq!(
        o.memory.map(|m| (m.usage_bytes, m.limit_bytes)),
        Some((Some(805_306_368), Some(2_147_483_648)))
    );
    assert_eq!(o.instance.device_id, Some(DeviceId::from_random([7; 16])));

    // The node says the sandbox is paused: not running. Stale counters: no current sample.
    report(&app.store, "sbx-1", edge::now(), 483.0, false).await?;
    let o = client.retrieve_runtime_observation(managed.project, managed.session).await?;
    assert_eq!(o.reason, Some(Reason::RuntimeNotRunning));
    let stale = session(&app, &tenant, "openai_hosted").await?;
    activate(&app.store, &stale, "sbx-stale").await?;
    report(&app.store, "sbx-stale", edge::now().plus_seconds(-3600), 1.0, true).await?;
    let o = client.retrieve_runtime_observation(stale.project, stale.session).await?;
    assert_eq!(o.reason, Some(Reason::SampleUnavailable));

    // Suspended is sleeping (still read); cleanup pending is stopped (never read).
    app.store
        .allocations()
        .set_state(&stale.project, &stale.session, AllocationState::Suspended, edge::now())
        .await?;
    let o = client.retrieve_runtime_observation(stale.project, stale.session).await?;
    assert_eq!(o.lifecycle_state, Some(LifecycleState::Sleeping));
    app.store
        .allocations()
        .set_state(&stale.project, &stale.session, AllocationState::CleanupPending, edge::now())
        .await?;
    let o = client.retrieve_runtime_observation(stale.project, stale.session).await?;
    assert_eq!(
        (o.lifecycle_state, o.reason),
        (Some(LifecycleState::Stopped), Some(Reason::RuntimeNotRunning))
    );
    assert_eq!(o.provider_type, None);
    Ok(())
}

#[tokio::test]
async fn unconfigured_and_slow_sources_are_unavailable_rows() -> R {
    let deadline = Duration::from_millis(150);
    let app = TestApp::spawn_with(|app| {
        let runtime = RuntimeTelemetry {
            sources: ObservationSources::new(deadline).with("local", Slow(Duration::from_secs(5))),
            ..app.runtime.clone()
        };
        app.with_runtime(runtime)
    })
    .await?;
    let tenant = app.tenant().await?;
    let ids = session(&app, &tenant, "openai_hosted").await?;
    activate(&app.store, &ids, "sbx-slow").await?;
    let o = admin(&app).retrieve_runtime_observation(ids.project, ids.session).await?;
    assert_eq!((o.status, o.reason), (ObservationStatus::Unavailable, Some(Reason::SampleTimeout)));
    assert_eq!(o.provider_type.as_deref(), Some("local"));

    let bare = TestApp::spawn_with(|app| {
        let runtime = RuntimeTelemetry { sources: ObservationSources::new(deadline), ..app.runtime.clone() };
        app.with_runtime(runtime)
    })
    .await?;
    let tenant = bare.tenant().await?;
    let ids = session(&bare, &tenant, "openai_hosted").await?;
    activate(&bare.store, &ids, "sbx-1").await?;
    let o = admin(&bare).retrieve_runtime_observation(ids.project, ids.session).await?;
    assert_eq!(o.reason, Some(Reason::SourceNotConfigured));
    assert_eq!(o.provider_type, None);
    Ok(())
}

#[tokio::test]
async fn single_observation_refuses_parameters_and_foreign_or_unknown_ids() -> R {
    let app = TestApp::spawn().await?;
    let mine = app.tenant().await?;
    let theirs = app.tenant().await?;
    let ids = session(&app, &mine, "openai_hosted").await?;
    let path = observation_path(&ids.project, &ids.session);

    for query in ["x=1", "after=a", "limit=5", "x"] {
        let (status, body) = send(app.core(Method::GET, &format!("{path}?{query}"))).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "unsupported_parameter");
    }
    let unknown = SessionId::from_random(edge::random()?);
    for path in [
        observation_path(&theirs.project_id, &ids.session),
        observation_path(&"not-a-project", &ids.session),
        observation_path(&ids.project, &"not-a-session"),
        observation_path(&ids.project, &unknown),
        observation_path(&ProjectId::from_random(edge::random()?), &ids.session),
    ] {
        let (status, body) = send(app.core(Method::GET, &path)).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    }

    // Releasing the session stops its allocation; the session then leaves Core's reads.
    let (status, body) =
        send(app.client(&mine.key, Method::DELETE, &format!("/sessions/{}", ids.session))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let allocation = app.store.allocations().get(&ids.project, &ids.session).await?.expect("kept");
    assert_eq!(allocation.record.state, AllocationState::Released);
    assert!(app.store.allocations().list_live().await?.is_empty());
    let (status, body) = send(app.core(Method::GET, &path)).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    Ok(())
}

#[tokio::test]
async fn observation_list_pages_every_live_session_of_every_project() -> R {
    let app = TestApp::spawn().await?;
    let a = app.tenant().await?;
    let b = app.tenant().await?;
    let mut created = Vec::new();
    for (tenant, mode) in
        [(&a, "none"), (&b, "self_hosted"), (&a, "openai_hosted"), (&b, "openai_hosted"), (&a, "none")]
    {
        created.push(session(&app, tenant, mode).await?);
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    // A released managed session stays listed; a deleted one leaves.
    app.store.allocations().release(&created[3].project, &created[3].session, edge::now()).await?;
    let (status, _) =
        send(app.client(&a.key, Method::DELETE, &format!("/sessions/{}", created[4].session))).await?;
    assert_eq!(status, StatusCode::OK);
    let live: Vec<SessionId> = created[..4].iter().map(|i| i.session).collect();

    let client = admin(&app);
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = client
            .list_runtime_observations(ListRuntimeObservations {
                after,
                limit: Some(2),
                order: Some(Order::Asc),
            })
            .await?;
        for row in &page.data {
            let expected =
                created.iter().find(|i| i.session == row.observation.id).expect("a created session");
            assert_eq!(row.project_id, expected.project);
        }
        seen.extend(page.data.iter().map(|r| r.observation.id));
        if !page.has_more {
            break;
        }
        after = page.last_id;
    }
    assert_eq!(seen, live, "ascending by creation, deleted session left out");

    let page = client.list_runtime_observations(ListRuntimeObservations::default()).await?;
    let desc: Vec<SessionId> = page.data.iter().map(|r| r.observation.id).collect();
    assert_eq!(desc, live.iter().rev().copied().collect::<Vec<_>>(), "default order is desc");
    assert!(!page.has_more);
    let released = &page.data[0].observation;
    assert_eq!(
        (released.lifecycle_state, released.reason),
        (Some(LifecycleState::Stopped), Some(Reason::RuntimeNotRunning))
    );
    assert!(page.data.iter().all(|r| r.observation.disk.is_none()));

    // The raw page carries disk on every row and ignores unknown keys.
    let (status, body) =
        send(app.core(Method::GET, "/core/v1/sandbox/runtime-observations?limit=1&whatever=1")).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"][0]["observation"]["disk"], Value::Null);
    assert!(body["data"][0]["observation"].as_object().expect("object").contains_key("disk"));
    assert_eq!(body["has_more"], true);
    Ok(())
}

#[tokio::test]
async fn observation_list_validates_its_query_and_cursor() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let ids = session(&app, &tenant, "none").await?;
    let list = "/core/v1/sandbox/runtime-observations";
    for query in [
        "limit=0",
        "limit=101",
        "limit=abc",
        "limit=-1",
        "order=up",
        "limit=1&limit=2",
        "order=asc&order=desc",
        "after=a&after=b",
    ] {
        let (status, body) = send(app.core(Method::GET, &format!("{list}?{query}"))).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    }
    let deleted = session(&app, &tenant, "none").await?;
    send(app.client(&tenant.key, Method::DELETE, &format!("/sessions/{}", deleted.session))).await?;
    for after in
        ["nope".to_owned(), SessionId::from_random(edge::random()?).to_string(), deleted.session.to_string()]
    {
        let (status, body) = send(app.core(Method::GET, &format!("{list}?after={after}"))).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    }
    let (status, body) = send(app.core(Method::GET, &format!("{list}?after={}", ids.session))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"], json!([]));
    Ok(())
}

#[tokio::test]
async fn observation_list_past_its_budget_is_execution_unavailable() -> R {
    let app = TestApp::spawn_with(|app| {
        let runtime = RuntimeTelemetry {
            sources: ObservationSources::new(Duration::from_secs(5))
                .with("local", Slow(Duration::from_secs(3))),
            list_budget: Duration::from_millis(300),
            ..app.runtime.clone()
        };
        app.with_runtime(runtime)
    })
    .await?;
    let tenant = app.tenant().await?;
    let ids = session(&app, &tenant, "openai_hosted").await?;
    activate(&app.store, &ids, "sbx-slow").await?;
    let (status, body) = send(app.core(Method::GET, "/core/v1/sandbox/runtime-observations")).await?;
    assert_error((status, &body), StatusCode::SERVICE_UNAVAILABLE, "execution_unavailable");
    Ok(())
}

#[tokio::test]
async fn sampler_writes_one_sample_per_allocation_per_interval() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let pending = session(&app, &tenant, "openai_hosted").await?;
    let running = session(&app, &tenant, "openai_hosted").await?;
    let silent = session(&app, &tenant, "openai_hosted").await?;
    let released = session(&app, &tenant, "openai_hosted").await?;
    session(&app, &tenant, "none").await?;
    session(&app, &tenant, "self_hosted").await?;
    activate(&app.store, &running, "sbx-run").await?;
    activate(&app.store, &silent, "sbx-silent").await?;
    send(app.client(&tenant.key, Method::DELETE, &format!("/sessions/{}", released.session))).await?;
    app.store
        .sessions()
        .add_usage(
            &running.project,
            &running.session,
            agentplane_domain::pricing::Usage { input_tokens: 120, output_tokens: 30 },
            Some(0.0),
        )
        .await?;
    // Five seconds into an interval, so that "half a second later" is the same interval.
    let real = edge::now().unix_seconds();
    let now = Timestamp::from_unix_seconds(real - real.rem_euclid(30) + 5);
    report(&app.store, "sbx-run", now, 12.5, true).await?;

    let runtime = RuntimeTelemetry::from_env(&app.store);
    let first = sample_once(&app.store, &runtime, now).await?;
    assert_eq!((first.allocations, first.written, first.duplicates, first.failed), (3, 3, 0, 0));
    assert_eq!((first.observed, first.unavailable), (1, 2));
    // The same interval again (a retried schedule, a little later): nothing is written twice.
    let again = sample_once(&app.store, &runtime, now.plus_millis(500)).await?;
    assert_eq!((again.written, again.duplicates), (0, 3));
    assert_eq!(again.interval_start, first.interval_start);
    // The next interval: one more each.
    let next = sample_once(&app.store, &runtime, now.plus_seconds(30)).await?;
    assert_eq!(next.written, 3);

    let read = |ids: &Ids| {
        let store = app.store.clone();
        let session = ids.session;
        async move { store.telemetry().samples(&session, 0, i64::MAX / 2).await }
    };
    let samples = read(&running).await?.samples;
    assert_eq!(samples.len(), 2);
    assert!(samples[0].is_observed());
    assert_eq!(samples[0].token_usage, Some(TokenUsage { input_tokens: 120, output_tokens: 30 }));
    let alloc = samples[0].allocation.as_ref().expect("allocation");
    assert_eq!(alloc.compute_started_at, ComputeStart::new(now.unix_seconds() - 100, 250_000_000));
    let reason = |s: &RuntimeSample| match s.status {
        SampleStatus::Unavailable { reason } => Some(reason),
        SampleStatus::Observed { .. } => None,
    };
    assert_eq!(reason(&read(&pending).await?.samples[0]), Some(Reason::AllocationPending));
    assert_eq!(reason(&read(&silent).await?.samples[0]), Some(Reason::SampleUnavailable));
    assert!(read(&released).await?.samples.is_empty());

    // Reads add no samples.
    admin(&app).retrieve_runtime_observation(running.project, running.session).await?;
    assert_eq!(read(&running).await?.samples.len(), 2);
    Ok(())
}

#[tokio::test]
async fn history_refuses_bad_queries_wrong_modes_and_foreign_sessions() -> R {
    let app = TestApp::spawn().await?;
    let mine = app.tenant().await?;
    let theirs = app.tenant().await?;
    let ids = session(&app, &mine, "openai_hosted").await?;
    let now = edge::now().unix_seconds();
    let (start, end) = (now - 3600, now);
    for query in [
        format!("start={start}&end={end}&x=1"),
        format!("start={start}&start={start}&end={end}"),
        format!("start={start}&end={end}&max_points=5&max_points=5"),
    ] {
        let (status, body) = send(app.core(Method::GET, &history_path(&ids, &query))).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "unsupported_parameter");
    }
    for query in [
        format!("end={end}"),
        format!("start={start}"),
        format!("start={end}&end={start}"),
        format!("start={start}&end={start}"),
        format!("start={}&end={end}", end - 86_401),
        format!("start={start}&end={}", now + 120),
        format!("start=-5&end={end}"),
        format!("start={start}&end={end}&max_points=1"),
        format!("start={start}&end={end}&max_points=1001"),
        format!("start={start}&end={end}&max_points=ten"),
    ] {
        let (status, body) = send(app.core(Method::GET, &history_path(&ids, &query))).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request");
    }
    let query = format!("start={start}&end={end}");
    let foreign = Ids { project: theirs.project_id.parse()?, session: ids.session };
    let unknown = Ids { project: ids.project, session: SessionId::from_random(edge::random()?) };
    for target in [&foreign, &unknown] {
        let (status, body) = send(app.core(Method::GET, &history_path(target, &query))).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    }
    for mode in ["none", "self_hosted"] {
        let other = session(&app, &mine, mode).await?;
        let (status, body) = send(app.core(Method::GET, &history_path(&other, &query))).await?;
        assert_error((status, &body), StatusCode::CONFLICT, "runtime_history_unsupported");
    }
    let (status, body) = send(app.core(Method::GET, &history_path(&ids, &query))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Without a sampler Core keeps no history.
    let unsampled = TestApp::spawn_with(|app| {
        let runtime = RuntimeTelemetry { history_enabled: false, ..app.runtime.clone() };
        app.with_runtime(runtime)
    })
    .await?;
    let tenant = unsampled.tenant().await?;
    let ids = session(&unsampled, &tenant, "openai_hosted").await?;
    let (status, body) = send(unsampled.core(Method::GET, &history_path(&ids, &query))).await?;
    assert_error((status, &body), StatusCode::SERVICE_UNAVAILABLE, "runtime_history_unavailable");
    Ok(())
}

fn cpu_sample(at: i64, alloc: &SampleAllocation, cpu: f64, tokens: u64) -> RuntimeSample {
    RuntimeSample {
        sampled_at: Timestamp::from_unix_seconds(at),
        allocation: Some(alloc.clone()),
        status: SampleStatus::Observed {
            readings: SampleReadings {
                cpu_seconds_total: Some(cpu),
                capacity_cores: Some(1.0),
                memory_usage_bytes: Some(1 << 20),
                memory_limit_bytes: Some(1 << 30),
                ..SampleReadings::default()
            },
        },
        token_usage: Some(TokenUsage { input_tokens: tokens, output_tokens: tokens / 2 }),
    }
}

/// Stores samples as the sampler would (keyed by their 30 s interval), 50 at a time.
async fn seed(store: &Store, session: SessionId, samples: Vec<RuntimeSample>) -> R {
    let telemetry = store.telemetry();
    for chunk in samples.chunks(50) {
        let writes = chunk.iter().map(|s| {
            let at = s.sampled_at.unix_seconds();
            telemetry.put_sample(&session, at - at.rem_euclid(30), s)
        });
        for written in futures_util::future::join_all(writes).await {
            anyhow::ensure!(written?, "a seeded sample collided");
        }
    }
    Ok(())
}

async fn managed_allocation(app: &TestApp, tenant: &Tenant) -> anyhow::Result<(Ids, SampleAllocation)> {
    let ids = session(app, tenant, "openai_hosted").await?;
    let allocation = app.store.allocations().get(&ids.project, &ids.session).await?.expect("allocation");
    let alloc = SampleAllocation {
        allocation_id: allocation.record.allocation_id,
        environment_id: allocation.environment_id,
        provider_type: allocation.record.provider_type.clone(),
        compute_started_at: None,
    };
    Ok((ids, alloc))
}

#[tokio::test]
async fn history_of_a_day_reads_every_stored_sample() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let (ids, mut alloc) = managed_allocation(&app, &tenant).await?;
    let now = edge::now().unix_seconds();
    let start = now - 86_400 - now.rem_euclid(30);
    alloc.compute_started_at = ComputeStart::new(start - 10, 0);
    let samples =
        (0..2880).map(|i| cpu_sample(start + 30 * i + 1, &alloc, 6.0 * i as f64, i as u64 * 10)).collect();
    seed(&app.store, ids.session, samples).await?;

    let request = RuntimeHistoryRequest { start, end: start + 86_400, max_points: Some(1000) };
    let h = admin(&app).retrieve_runtime_history(ids.project, ids.session, request).await?;
    assert_eq!(h.resolution_seconds, 87);
    assert_eq!(h.coverage.sample_count, 2880);
    assert_eq!(h.coverage.expected_sample_count, 2880);
    assert_eq!(h.series.len(), 1);
    assert_eq!(h.series[0].allocation_id, alloc.allocation_id);
    assert_eq!(h.series[0].started_at, alloc.compute_started_at);
    assert_eq!(h.coverage.buckets.len(), 993, "every full 87 s bucket holds samples; the last 9 s one none");
    // 6 CPU seconds every 30 s on one core.
    let ratios: Vec<f64> = h.series[0]
        .points
        .iter()
        .skip(1)
        .filter_map(|p| p.cpu.as_ref())
        .map(|c| c.utilization_ratio)
        .collect();
    assert!(ratios.iter().all(|r| (r - 0.2).abs() < 1e-9), "{ratios:?}");
    let last = h.token_usage.last().expect("token usage");
    assert_eq!((last.input_tokens, last.output_tokens), (28_790, 14_395));
    Ok(())
}

#[tokio::test]
async fn history_resets_cpu_baselines_on_a_new_incarnation_and_a_counter_reset() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let (ids, alloc) = managed_allocation(&app, &tenant).await?;
    let now = edge::now().unix_seconds();
    let start = now - 3600 - now.rem_euclid(60);
    let first = SampleAllocation { compute_started_at: ComputeStart::new(start - 50, 1), ..alloc.clone() };
    let second = SampleAllocation { compute_started_at: ComputeStart::new(start + 1795, 7), ..alloc.clone() };
    let mut samples = Vec::new();
    for i in 0..119i64 {
        let at = start + 30 * i + 1;
        samples.push(match i {
            // Half a core, then a new incarnation at full load, then a counter reset at a fifth.
            0..60 => cpu_sample(at, &first, 15.0 * i as f64, 0),
            60..90 => cpu_sample(at, &second, 30.0 * (i - 60) as f64, 0),
            _ => cpu_sample(at, &second, 6.0 * (i - 90) as f64, 0),
        });
    }
    // The last sample is unavailable: counted, never a zero.
    samples.push(RuntimeSample {
        sampled_at: Timestamp::from_unix_seconds(start + 30 * 119 + 1),
        allocation: Some(SampleAllocation { compute_started_at: None, ..alloc.clone() }),
        status: SampleStatus::Unavailable { reason: Reason::SampleTimeout },
        token_usage: None,
    });
    seed(&app.store, ids.session, samples).await?;

    let request = RuntimeHistoryRequest { start, end: start + 3600, max_points: Some(60) };
    let h = admin(&app).retrieve_runtime_history(ids.project, ids.session, request).await?;
    assert_eq!(h.resolution_seconds, 60);
    assert_eq!(h.coverage.sample_count, 120);
    let points = &h.series[0].points;
    assert_eq!(points.len(), 60);
    let ratio = |k: usize| points[k].cpu.as_ref().map(|c| (c.utilization_ratio, c.contributor_count));
    assert_eq!(ratio(29), Some((0.5, 2)));
    assert_eq!(ratio(30), Some((1.0, 1)), "the interval across the incarnation change is dropped");
    assert_eq!(ratio(31), Some((1.0, 2)));
    let (r45, c45) = ratio(45).expect("cpu");
    assert!((r45 - 0.2).abs() < 1e-9 && c45 == 1, "the interval across the counter reset is dropped");
    assert_eq!(h.series[0].started_at, first.compute_started_at, "the earliest retained start");
    assert_eq!(points[59].unavailable_count, 1);
    assert_eq!(h.coverage.buckets[59].observation_count, 2);
    Ok(())
}
