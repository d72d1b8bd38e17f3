//! Managed compute end to end: an openai_hosted Session is placed on a real sandbox node, a
//! process in its sandbox burns CPU, and the node's heartbeats, the sampler, the runtime
//! observation and the runtime history show it. The node then goes offline (samples become
//! honest gaps) and comes back (same incarnation, observed again); deleting the Session ends the
//! compute.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use agentplane_admin_client::{AdminClient, RuntimeHistoryRequest, SandboxAdminClient};
use agentplane_api::edge;
use agentplane_api::sandbox::managed;
use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::SESSION_METADATA_KEY;
use agentplane_domain::telemetry::observation_wire::{LifecycleState, ObservationStatus, RuntimeObservation};
use agentplane_domain::telemetry::{AllocationState, NodeRange, Reason, RuntimeHistory, SamplingInterval};
use agentplane_domain::{ProjectId, SessionId};
use agentplane_engine::runtime::{
    LOCAL_PROVIDER, LocalUsageSource, ObservationSources, RuntimeTelemetry, sample_once,
};
use agentplane_tests::{Tenant, TestApp, TestNode, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// Samples every second; counters older than three seconds are not current.
async fn app() -> anyhow::Result<TestApp> {
    TestApp::spawn_with(|app| {
        let store = app.store.clone();
        app.with_runtime(RuntimeTelemetry {
            sources: ObservationSources::new(Duration::from_secs(2))
                .with(LOCAL_PROVIDER, LocalUsageSource::new(store, Duration::from_secs(3))),
            interval: SamplingInterval::from_seconds(1).expect("interval"),
            history_enabled: true,
            list_budget: Duration::from_secs(10),
            history_deadline: Duration::from_secs(10),
        })
    })
    .await
}

struct Hosted {
    project: ProjectId,
    session: SessionId,
    sandbox: String,
}

/// Creates an openai_hosted Session: (its project, its id).
async fn create_hosted(app: &TestApp, tenant: &Tenant) -> anyhow::Result<(ProjectId, SessionId)> {
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/sessions")
            .json(&json!({ "environment_mode": "openai_hosted" })),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "create session: {status} {body}");
    Ok((tenant.project_id.parse()?, str_field(&body, "id")?.parse()?))
}

async fn hosted_session(app: &TestApp, tenant: &Tenant) -> anyhow::Result<Hosted> {
    let (project, session) = create_hosted(app, tenant).await?;
    let allocation = app.store.allocations().get(&project, &session).await?.expect("allocation");
    assert_eq!(allocation.record.state, AllocationState::Running, "placed at once: {allocation:?}");
    let sandbox = allocation.sandbox_id.map(String::from).expect("bound to a sandbox");
    Ok(Hosted { project, session, sandbox })
}

/// Sampler passes, one per second, for `seconds`.
async fn sample_for(app: &TestApp, seconds: u64) -> R {
    for _ in 0..seconds {
        sample_once(&app.store, &app.app.runtime, edge::now()).await?;
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
    Ok(())
}

/// Sampler passes, one per second, until the observation satisfies `done` (at most `seconds`):
/// a loaded host heartbeats late, so wait for the state rather than for a fixed time.
async fn sample_until(
    app: &TestApp,
    (project, session): (ProjectId, SessionId),
    seconds: u64,
    done: impl Fn(&RuntimeObservation) -> bool,
) -> anyhow::Result<RuntimeObservation> {
    let admin = AdminClient::new(&app.base, &app.core_key);
    for _ in 0..seconds {
        sample_once(&app.store, &app.app.runtime, edge::now()).await?;
        let seen = admin.retrieve_runtime_observation(project, session).await?;
        if done(&seen) {
            return Ok(seen);
        }
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
    anyhow::bail!("the observation never reached the expected state within {seconds} s")
}

async fn history(app: &TestApp, hosted: &Hosted, since: i64) -> anyhow::Result<RuntimeHistory> {
    let end = edge::now().unix_seconds();
    Ok(AdminClient::new(&app.base, &app.core_key)
        .retrieve_runtime_history(
            hosted.project,
            hosted.session,
            RuntimeHistoryRequest { start: since, end, max_points: Some(1000) },
        )
        .await?)
}

fn busiest(history: &RuntimeHistory) -> f64 {
    history.series[0]
        .points
        .iter()
        .filter_map(|p| p.cpu.as_ref())
        .map(|c| c.utilization_ratio)
        .fold(0.0, f64::max)
}

#[tokio::test]
async fn a_hosted_session_burning_cpu_on_a_node_is_observed_through_an_outage_until_released() -> R {
    agentplane_api::logs::init_local_tracing();
    let app = app().await?;
    let mut node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let began = edge::now().unix_seconds();
    let hosted = hosted_session(&app, &tenant).await?;
    let admin = AdminClient::new(&app.base, &app.core_key);

    // The sandbox API sees the Session's compute, may run processes in it, and may not end it.
    let (status, listed) = send(app.sandbox(&tenant.key, Method::GET, "/sandboxes")).await?;
    assert_eq!(status, StatusCode::OK);
    let mine = listed.as_array().expect("list").iter().find(|s| s["sandboxID"] == hosted.sandbox.as_str());
    let mine = mine.expect("the managed sandbox is listed");
    assert_eq!(mine["metadata"][SESSION_METADATA_KEY], hosted.session.to_string());
    for (method, path, body) in [
        (Method::DELETE, format!("/sandboxes/{}", hosted.sandbox), None),
        (Method::POST, format!("/sandboxes/{}/pause", hosted.sandbox), None),
        (Method::POST, format!("/sandboxes/{}/timeout", hosted.sandbox), Some(json!({"timeout": 900}))),
    ] {
        let mut request = app.sandbox(&tenant.key, method, &path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let (status, body) = send(request).await?;
        assert_eq!(status, StatusCode::CONFLICT, "{path}: {body}");
    }
    let (status, started) = send(
        app.sandbox(&tenant.key, Method::POST, &format!("/sandboxes/{}/processes", hosted.sandbox))
            .json(&json!({"cmd": "sh", "args": ["-c", "while :; do :; done"]})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{started}");

    // Burning: counters climb, and every observed interval shows it.
    sample_for(&app, 5).await?;
    let seen = sample_until(&app, (hosted.project, hosted.session), 30, |o| {
        o.status == ObservationStatus::Observed
            && o.cpu.as_ref().and_then(|c| c.usage_seconds_total).is_some_and(|s| s > 0.1)
    })
    .await?;
    assert_eq!(seen.lifecycle_state, Some(LifecycleState::Active));
    assert_eq!(seen.provider_type.as_deref(), Some(LOCAL_PROVIDER));
    let cpu = seen.cpu.as_ref().expect("cpu");
    assert!(cpu.usage_seconds_total.expect("cpu seconds") > 0.1, "{cpu:?}");
    assert_eq!(cpu.capacity_cores, Some(1.0), "the sandbox's quota is one core");
    assert!(seen.memory.as_ref().and_then(|m| m.usage_bytes).is_some_and(|b| b > 0), "{seen:?}");
    let started_at = seen.started_at.expect("started_at");
    let observed_by = edge::now().unix_seconds();
    assert!((began - 1..=observed_by).contains(&started_at), "{started_at} vs {began}..{observed_by}");

    let burning = history(&app, &hosted, began - 10).await?;
    assert_eq!(burning.series.len(), 1);
    assert_eq!(burning.series[0].started_at.map(|s| s.seconds), Some(started_at));
    let peak = busiest(&burning);
    // Busy, and never past the one-core quota. How busy is up to the scheduler of a shared
    // machine, so the rule is only "some, and at most one core".
    assert!(peak > 0.0 && peak <= 1.05, "a busy loop under a one-core quota: peak utilization {peak}");
    assert!(burning.coverage.sample_count >= 5, "{:?}", burning.coverage);

    // Offline: no heartbeats, so the counters go stale and samples are honest gaps.
    node.stop().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    sample_until(&app, (hosted.project, hosted.session), 30, |o| o.status == ObservationStatus::Unavailable)
        .await?;
    // One sample per interval: the next ones belong to the following seconds.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    sample_for(&app, 2).await?;
    let gap = admin.retrieve_runtime_observation(hosted.project, hosted.session).await?;
    assert_eq!((gap.status, gap.reason), (ObservationStatus::Unavailable, Some(Reason::SampleUnavailable)));
    assert_eq!(gap.lifecycle_state, Some(LifecycleState::Active), "the allocation itself did not change");
    assert!(gap.cpu.is_none() && gap.observed_at.is_none(), "{gap:?}");

    // Back: the same incarnation (its cgroup lived on), observed and busy again.
    node.restart(&app).await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    sample_for(&app, 2).await?;
    let back =
        sample_until(&app, (hosted.project, hosted.session), 30, |o| o.status == ObservationStatus::Observed)
            .await?;
    sample_for(&app, 2).await?;
    assert_eq!(back.started_at, Some(started_at), "same incarnation");
    let after = history(&app, &hosted, began - 10).await?;
    assert_eq!(after.series.len(), 1, "one series per allocation");
    let unavailable: u64 = after.coverage.buckets.iter().map(|b| b.unavailable_count).sum();
    assert!(unavailable >= 2, "the outage stays in the history: {:?}", after.coverage);
    // Buckets are at least 30 s wide, so the gap shares a bucket with observed samples.
    assert!(after.series[0].points.iter().any(|p| p.unavailable_count >= 2), "{:?}", after.series[0].points);
    let last_busy = after.series[0].points.iter().rev().find_map(|p| p.cpu.as_ref()).expect("cpu after");
    assert!(last_busy.utilization_ratio > 0.1, "busy again after the outage: {last_busy:?}");

    // The node's own view: online again, on a new connection.
    let node_id: NodeId = node.node_id.parse()?;
    let detail =
        SandboxAdminClient::new(&app.base, &app.core_key).retrieve_node(node_id, NodeRange::OneHour).await?;
    assert!(detail.online);
    assert!(detail.host.observed_at.is_some());

    // Deleting the Session stops the allocation and ends the sandbox on the node.
    let (status, _) =
        send(app.client(&tenant.key, Method::DELETE, &format!("/sessions/{}", hosted.session))).await?;
    assert_eq!(status, StatusCode::OK);
    let allocation = app.store.allocations().get(&hosted.project, &hosted.session).await?.expect("kept");
    assert_eq!(allocation.record.state, AllocationState::Released);
    let (status, ended) =
        send(app.sandbox(&tenant.key, Method::GET, &format!("/sandboxes/{}", hosted.sandbox))).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ended["state"], "killed", "{ended}");
    let workspace = node.config.state_dir.join("sandboxes").join(&hosted.sandbox);
    for _ in 0..200 {
        if !workspace.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!workspace.exists(), "the node removed the session's sandbox");
    Ok(())
}

#[tokio::test]
async fn without_an_online_node_the_allocation_waits_pending_and_other_projects_see_nothing() -> R {
    let app = app().await?;
    let tenant = app.tenant().await?;
    let (project, session) = create_hosted(&app, &tenant).await?;
    let allocation = app.store.allocations().get(&project, &session).await?.expect("allocation");
    assert_eq!(allocation.record.state, AllocationState::Pending);
    assert_eq!(allocation.sandbox_id, None);
    let seen =
        AdminClient::new(&app.base, &app.core_key).retrieve_runtime_observation(project, session).await?;
    assert_eq!((seen.status, seen.reason), (ObservationStatus::Unavailable, Some(Reason::AllocationPending)));

    // With a node, a hosted session's sandbox is its own project's alone.
    let _node = TestNode::start(&app).await?;
    let hosted = hosted_session(&app, &tenant).await?;
    let other = app.tenant().await?;
    let (status, listed) = send(app.sandbox(&other.key, Method::GET, "/sandboxes")).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed, Value::Array(vec![]));
    let (status, _) =
        send(app.sandbox(&other.key, Method::GET, &format!("/sandboxes/{}", hosted.sandbox))).await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send(
        app.sandbox(&other.key, Method::POST, &format!("/sandboxes/{}/processes", hosted.sandbox))
            .json(&json!({"cmd": "true"})),
    )
    .await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) =
        send(app.client(&tenant.key, Method::DELETE, &format!("/sessions/{}", hosted.session))).await?;
    assert_eq!(status, StatusCode::OK);
    Ok(())
}

#[tokio::test]
async fn the_placer_places_pending_allocations_once_and_replaces_ended_compute_as_a_new_incarnation() -> R {
    let app = app().await?;
    let tenant = app.tenant().await?;
    let (project, session) = create_hosted(&app, &tenant).await?;

    // A node arrives. A fresh pending allocation is left to its Session's create; an older one
    // is placed, once, however many placer runs overlap.
    let _node = TestNode::start(&app).await?;
    let fresh = managed::reconcile(&app.app, edge::now()).await?;
    assert_eq!((fresh.allocations, fresh.placed, fresh.failed), (1, 0, 0));
    let later = edge::now().plus_seconds(31);
    let (a, b) = tokio::join!(managed::reconcile(&app.app, later), managed::reconcile(&app.app, later));
    let (a, b) = (a?, b?);
    assert_eq!(a.placed + b.placed, 1, "{a:?} {b:?}");
    let allocation = app.store.allocations().get(&project, &session).await?.expect("allocation");
    assert_eq!(allocation.record.state, AllocationState::Running);
    let first = allocation.sandbox_id.clone().map(String::from).expect("bound");
    let running = |listed: &Value| -> Vec<String> {
        listed
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["state"] == "running" && s["metadata"][SESSION_METADATA_KEY] == session.to_string())
            .filter_map(|s| s["sandboxID"].as_str().map(str::to_owned))
            .collect()
    };
    let (_, listed) = send(app.sandbox(&tenant.key, Method::GET, "/sandboxes")).await?;
    assert_eq!(running(&listed), vec![first.clone()], "the losing placement's sandbox was ended");
    let nothing = managed::reconcile(&app.app, later).await?;
    assert_eq!((nothing.placed, nothing.replaced), (0, 0));

    // Some samples of the first incarnation.
    let before =
        sample_until(&app, (project, session), 30, |o| o.status == ObservationStatus::Observed).await?;
    // An interval keeps its first sample only (written once), which may predate the observation
    // above: sample on until a kept sample of this incarnation carries its start, so the history
    // below has one to report whatever the machine's pace.
    let since = before.started_at.expect("started") - 5;
    let first_hosted = Hosted { project, session, sandbox: first.clone() };
    let waited = std::time::Instant::now();
    loop {
        let kept = history(&app, &first_hosted, since).await?;
        if kept.series.first().and_then(|s| s.started_at).is_some() {
            break;
        }
        anyhow::ensure!(
            waited.elapsed() < Duration::from_secs(90),
            "no kept sample carries the start: {kept:?}"
        );
        sample_once(&app.store, &app.app.runtime, edge::now()).await?;
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }

    // The compute ends under the live allocation: the placer gives it a new incarnation.
    let ended = app.store.sandboxes().get_any(&first.parse()?).await?;
    agentplane_api::sandbox::sandboxes::end(&app.app, &ended).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let replaced = managed::reconcile(&app.app, edge::now()).await?;
    assert_eq!((replaced.placed, replaced.replaced, replaced.failed), (0, 1, 0));
    let allocation = app.store.allocations().get(&project, &session).await?.expect("allocation");
    let second = allocation.sandbox_id.clone().map(String::from).expect("bound");
    assert_ne!(second, first);
    assert_eq!(allocation.record.allocation_id, before.instance.allocation_id.expect("allocation id"));

    let after = sample_until(&app, (project, session), 30, |o| {
        o.status == ObservationStatus::Observed && o.started_at > before.started_at
    })
    .await?;
    assert!(after.started_at > before.started_at, "a new incarnation: {after:?} after {before:?}");
    assert_eq!(after.instance.allocation_id, before.instance.allocation_id, "the same allocation");
    let history = history(&app, &Hosted { project, session, sandbox: second }, since).await?;
    assert_eq!(history.series.len(), 1, "one series per allocation across incarnations");
    assert_eq!(
        history.series[0].started_at.map(|s| s.seconds),
        before.started_at,
        "the earliest retained start"
    );
    let (status, _) = send(app.client(&tenant.key, Method::DELETE, &format!("/sessions/{session}"))).await?;
    assert_eq!(status, StatusCode::OK);
    Ok(())
}
