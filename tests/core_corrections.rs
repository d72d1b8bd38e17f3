//! Corrections of Core reads: a node's history over a long uptime, the stored identity behind a
//! runtime history, and process state while a node is away.
// Helpers are test code: a broken setup should fail loudly where it happens.
#![allow(clippy::expect_used)]

use agentplane_domain::Timestamp;
use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::command::{NodeEvent, Stream};
use agentplane_domain::sandbox::host::{HostObservation, SandboxUsage};
use agentplane_domain::sandbox::{Lifecycle, ProcessConfig, ProcessId, Sandbox, SandboxId};
use agentplane_domain::telemetry::node::NodeObservation;
use agentplane_tests::{TestApp, send, str_field};
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use futures_util::{StreamExt, stream};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// The daemon's default heartbeat cadence (`AGENTPLANE_NODE_HEARTBEAT_S`).
const HEARTBEAT_S: i64 = 5;

fn now() -> Timestamp {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    Timestamp::from_unix_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}

async fn register_node(app: &TestApp) -> anyhow::Result<(String, NodeId)> {
    let (status, node) =
        send(app.core(Method::POST, "/core/v1/sandbox/nodes").json(&json!({"name": "long-uptime"}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{node}");
    let id = str_field(&node, "id")?;
    let node_id = id.parse()?;
    Ok((id, node_id))
}

fn host_values(at_ms: i64) -> NodeObservation {
    NodeObservation {
        observed_at: Timestamp::from_unix_millis(at_ms),
        effective_cpu_cores: Some(2.0),
        cpu_utilization: Some(0.25),
        total_memory_bytes: Some(16 * 1024 * 1024 * 1024),
        available_memory_bytes: Some(8 * 1024 * 1024 * 1024),
        available_disk_bytes: Some(100 * 1024 * 1024 * 1024),
    }
}

/// A full day (and a little more) of heartbeats at the daemon's cadence, written straight to the
/// table with the store's own writer, several batches at once.
async fn write_a_day_of_heartbeats(app: &TestApp, node: &NodeId, now: Timestamp) -> anyhow::Result<usize> {
    // From past the start of the 24 h range to a few minutes ahead, so the last complete bucket
    // stays covered however long the writes take.
    let first = now.unix_millis() - (24 * 3600 + 20 * 60) * 1000;
    let last = now.unix_millis() + 10 * 60 * 1000;
    let all: Vec<NodeObservation> =
        (first..last).step_by(usize::try_from(HEARTBEAT_S * 1000)?).map(host_values).collect();
    let count = all.len();
    let nodes = app.store.nodes();
    let results: Vec<_> = stream::iter(all.chunks(100))
        .map(|chunk| nodes.append_history(node, chunk))
        .buffer_unordered(32)
        .collect()
        .await;
    for result in results {
        result?;
    }
    Ok(count)
}

#[tokio::test]
async fn node_history_stays_filled_after_a_day_of_heartbeats() -> R {
    let app = TestApp::spawn().await?;
    let (id, node) = register_node(&app).await?;
    let started = std::time::Instant::now();
    let written = write_a_day_of_heartbeats(&app, &node, now()).await?;
    eprintln!("wrote {written} heartbeats in {:?}", started.elapsed());
    assert!(written > 17_000, "a day at 5 s is 17,280 heartbeats");

    for (range, width, buckets) in [("1h", 60, 60), ("6h", 300, 72), ("24h", 900, 96)] {
        let started = std::time::Instant::now();
        let (status, body) =
            send(app.core(Method::GET, &format!("/core/v1/sandbox/nodes/{id}?range={range}"))).await?;
        eprintln!("{range} read in {:?}", started.elapsed());
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["history"]["resolution_seconds"], width);
        let points = body["history"]["points"].as_array().cloned().unwrap_or_default();
        assert_eq!(points.len(), buckets, "{range}");
        // The most recent complete buckets are the ones an operator looks at first.
        for point in points.iter().rev().take(3) {
            assert_eq!(point["cpu_utilization_max"], 0.25, "{range}: {point}");
            assert_eq!(point["memory_used_bytes_max"], 8u64 * 1024 * 1024 * 1024, "{range}: {point}");
            assert_eq!(point["available_disk_bytes_min"], 100u64 * 1024 * 1024 * 1024, "{range}: {point}");
        }
        let empty: Vec<&Value> = points.iter().filter(|p| p["cpu_utilization_max"].is_null()).collect();
        assert!(empty.is_empty(), "{range}: a day of heartbeats leaves no bucket empty: {empty:?}");
    }

    // The 24 h read takes the range's heartbeats, every page of them, and no more.
    let at = now();
    let from = Timestamp::from_unix_seconds(at.unix_seconds().div_euclid(900) * 900 - 24 * 3600);
    let started = std::time::Instant::now();
    let read = app.store.nodes().history(&node, from, at).await?;
    eprintln!(
        "24h node history: {} items in {} requests, {:?}",
        read.items_read,
        read.requests,
        started.elapsed()
    );
    assert!(read.requests > 1, "a day of heartbeats spans several pages");
    assert!(read.items_read <= (24 * 3600 + 900) / 5 + 2, "read {} items", read.items_read);
    assert_eq!(read.observations.len() as u64, read.items_read);
    // The 1 h read takes only its own range, not the whole day.
    let at = now();
    let from = Timestamp::from_unix_seconds(at.unix_seconds().div_euclid(60) * 60 - 3600);
    let read = app.store.nodes().history(&node, from, at).await?;
    assert!(read.items_read <= 3600 / 5 + 130, "read {} items for one hour", read.items_read);
    assert!(read.items_read >= 3600 / 5, "read {} items for one hour", read.items_read);
    Ok(())
}

#[tokio::test]
async fn node_history_items_keep_host_values_only() -> R {
    let app = TestApp::spawn().await?;
    let (id, node) = register_node(&app).await?;
    let at = now();
    let heartbeat = HostObservation {
        connection_id: "conn-1".into(),
        observed_at: at,
        cpu: None,
        cpu_utilization: Some(0.5),
        total_memory_bytes: Some(1000),
        available_memory_bytes: Some(400),
        available_disk_bytes: Some(7),
        effective_cpu_cores: Some(1.0),
        sandboxes: (0..50u8)
            .map(|n| SandboxUsage {
                sandbox_id: agentplane_domain::sandbox::SandboxId::from_random([n; 16]),
                cpu_seconds: Some(1.0),
                memory_bytes: Some(1),
                memory_limit_bytes: Some(2),
                cpu_limit_cores: Some(1.0),
            })
            .collect(),
    };
    app.store.nodes().record_heartbeat(&node, &heartbeat).await?;
    let items = app
        .store
        .dynamo
        .query()
        .table_name(&app.store.names.telemetry_table)
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(format!("NODE#{id}")))
        .send()
        .await?
        .items
        .unwrap_or_default();
    assert_eq!(items.len(), 1);
    let text = items[0].get("observation").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
    let stored: Value = serde_json::from_str(&text)?;
    assert!(stored.get("sandboxes").is_none(), "{stored}");
    assert!(!text.contains("sbx_"), "{text}");
    assert_eq!(stored["available_disk_bytes"], 7);
    // The node item itself still carries the last heartbeat whole.
    let read = app.store.nodes().history(&node, at.plus_seconds(-1), at.plus_seconds(1)).await?;
    assert_eq!(read.observations.len(), 1);
    assert_eq!(read.observations[0].cpu_utilization, Some(0.5));
    Ok(())
}

/// An openai_hosted Session (its allocation stays pending: no node is online).
async fn hosted_session(app: &TestApp, key: &str) -> anyhow::Result<(String, String)> {
    let (status, body) = send(
        app.client(key, Method::POST, "/sessions").json(&json!({ "environment_mode": "openai_hosted" })),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    Ok((body["project_id"].as_str().unwrap_or_default().to_owned(), str_field(&body, "id")?))
}

/// Changes (or, with `None`, removes) one attribute of a stored item, as corruption would.
async fn set_attribute(
    app: &TestApp,
    pk: String,
    sk: String,
    name: &str,
    value: Option<AttributeValue>,
) -> R {
    set_attribute_in(app, &app.store.names.main_table, pk, sk, name, value).await
}

async fn set_attribute_in(
    app: &TestApp,
    table: &str,
    pk: String,
    sk: String,
    name: &str,
    value: Option<AttributeValue>,
) -> R {
    let update = app
        .store
        .dynamo
        .update_item()
        .table_name(table)
        .key("PK", AttributeValue::S(pk))
        .key("SK", AttributeValue::S(sk))
        .expression_attribute_names("#a", name);
    match value {
        Some(v) => update.update_expression("SET #a = :v").expression_attribute_values(":v", v),
        None => update.update_expression("REMOVE #a"),
    }
    .send()
    .await?;
    Ok(())
}

#[tokio::test]
async fn runtime_history_refuses_an_inconsistent_stored_identity() -> R {
    use agentplane_domain::telemetry::sample::Reason;
    use agentplane_domain::telemetry::{
        AllocationId, EnvironmentId, RuntimeSample, SampleAllocation, SampleStatus,
    };

    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let project = tenant.project_id.clone();
    let now_s = now().unix_seconds();
    let query = format!("start={}&end={now_s}", now_s - 3600);
    let history = |session: &str| {
        app.core(
            Method::GET,
            &format!("/core/v1/projects/{project}/sessions/{session}/runtime-history?{query}"),
        )
    };
    let other_environment = EnvironmentId::from_random([9; 16]).to_string();

    // Intact: the history answers.
    let (_, good) = hosted_session(&app, &tenant.key).await?;
    let (status, body) = send(history(&good)).await?;
    assert_eq!(status, StatusCode::OK, "{body}");

    // 1. The allocation names another Environment than its Session.
    let (_, moved) = hosted_session(&app, &tenant.key).await?;
    set_attribute(
        &app,
        format!("PROJECT#{project}"),
        format!("ALLOCATION#{moved}"),
        "environment_id",
        Some(AttributeValue::S(other_environment.clone())),
    )
    .await?;
    // 2. The Session lost its Environment.
    let (_, homeless) = hosted_session(&app, &tenant.key).await?;
    set_attribute(&app, format!("PROJECT#{project}"), format!("SESSION#{homeless}"), "environment_id", None)
        .await?;
    // 3. A stored sample names another Environment and allocation than the Session's.
    let (_, stray) = hosted_session(&app, &tenant.key).await?;
    let stray_id: agentplane_domain::SessionId = stray.parse()?;
    let sample = RuntimeSample {
        sampled_at: Timestamp::from_unix_seconds(now_s - 600),
        allocation: Some(SampleAllocation {
            allocation_id: AllocationId::from_random([3; 16]),
            environment_id: other_environment.parse()?,
            provider_type: "local".into(),
            compute_started_at: None,
        }),
        status: SampleStatus::Unavailable { reason: Reason::SampleUnavailable },
        token_usage: None,
    };
    assert!(app.store.telemetry().put_sample(&stray_id, now_s - 600, &sample).await?);

    for session in [&moved, &homeless, &stray] {
        let (status, body) = send(history(session)).await?;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{session}: {body}");
        assert_eq!(body["error"]["code"], "internal_error", "{body}");
        let text = body.to_string();
        assert!(!text.contains(&other_environment) && !text.contains("PROJECT#"), "{text}");
    }
    // The observation route agrees on the corrupted allocation.
    let (status, body) = send(
        app.core(Method::GET, &format!("/core/v1/projects/{project}/sessions/{moved}/runtime-observation")),
    )
    .await?;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    Ok(())
}

/// A node whose last heartbeat was at `at` (online within 20 s of it).
async fn heartbeat_at(app: &TestApp, node: &NodeId, at: Timestamp) -> R {
    let observation = HostObservation {
        connection_id: "conn-1".into(),
        observed_at: at,
        cpu: None,
        cpu_utilization: None,
        total_memory_bytes: None,
        available_memory_bytes: None,
        available_disk_bytes: None,
        effective_cpu_cores: None,
        sandboxes: Vec::new(),
    };
    app.store.nodes().record_heartbeat(node, &observation).await?;
    Ok(())
}

/// Applies node events as the report route does, one batch of one connection.
async fn report(app: &TestApp, node: &NodeId, connection: &str, events: Vec<NodeEvent>) -> R {
    use agentplane_domain::sandbox::command::{Report, SequencedEvent};
    let events = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| SequencedEvent { seq: i as u64 + 1, event })
        .collect();
    let report = Report { connection_id: connection.into(), events };
    agentplane_api::node::report::apply(&app.app, node, report, now()).await?;
    Ok(())
}

fn started(sandbox: &SandboxId, n: u32, pid: u32, at: Timestamp) -> NodeEvent {
    NodeEvent::ProcessStarted {
        sandbox_id: sandbox.clone(),
        process: ProcessId::Observed(n),
        pid,
        config: ProcessConfig { cmd: "sleep".into(), args: vec!["600".into()], ..ProcessConfig::default() },
        tag: None,
        at,
    }
}

fn output(sandbox: &SandboxId, n: u32, text: &str, at: Timestamp) -> NodeEvent {
    NodeEvent::Output {
        sandbox_id: sandbox.clone(),
        process: ProcessId::Observed(n),
        stream: Stream::Stdout,
        at,
        data: base64::engine::general_purpose::STANDARD.encode(text),
    }
}

fn seen(sandbox: &SandboxId, pid: u32, cmd: &str, at: Timestamp) -> NodeEvent {
    NodeEvent::LiveSeen { sandbox_id: sandbox.clone(), pid, cmd: cmd.into(), args: Vec::new(), at }
}

#[tokio::test]
async fn processes_of_an_away_node_read_as_a_gap_and_lost_output_as_truncated() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let (_, node) = register_node(&app).await?;
    let at = now();
    heartbeat_at(&app, &node, at).await?;
    let sandbox = Sandbox {
        id: SandboxId::from_random(agentplane_api::edge::random()?),
        project_id: tenant.project_id.parse()?,
        node_id: node,
        started_at: at,
        lifecycle: Lifecycle::start(at, 3600),
        metadata: Default::default(),
        env_vars: Default::default(),
        isolation: Default::default(),
        session_id: None,
        envd_token_sealed: None,
    };
    app.store.sandboxes().create(&sandbox).await?;
    let id = sandbox.id.clone();
    report(
        &app,
        &node,
        "conn-1",
        vec![
            started(&id, 1, 42, at),
            output(&id, 1, "hello", at),
            started(&id, 2, 43, at),
            output(&id, 2, "first", at),
            output(&id, 2, "second", at),
        ],
    )
    .await?;
    let list = |state: &str| {
        app.sandbox(&tenant.key, Method::GET, &format!("/sandboxes/{id}/processes?state={state}"))
    };
    let read =
        |n: u32| app.sandbox(&tenant.key, Method::GET, &format!("/sandboxes/{id}/processes/obs-{n}/output"));

    // Watched: both run, no gap.
    let (status, body) = send(list("live")).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["processes"].as_array().map(Vec::len), Some(2), "{body}");
    assert_eq!(body["processes"][0]["observationGap"], false);

    // The node goes silent past the heartbeat window: nobody watches the processes.
    heartbeat_at(&app, &node, now().plus_seconds(-60)).await?;
    let (_, body) = send(list("live")).await?;
    assert_eq!(
        body["processes"].as_array().map(Vec::len),
        Some(0),
        "not live while the node is away: {body}"
    );
    let (_, body) = send(list("all")).await?;
    let processes = body["processes"].as_array().cloned().unwrap_or_default();
    assert_eq!(processes.len(), 2, "{body}");
    for p in &processes {
        assert_eq!(
            (p["state"].as_str(), p["observationGap"].as_bool()),
            (Some("unknown"), Some(true)),
            "{p}"
        );
    }
    let (status, body) = send(read(1)).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((body["state"].as_str(), body["observationGap"].as_bool()), (Some("unknown"), Some(true)));
    assert_eq!(body["chunks"].as_array().map(Vec::len), Some(1), "what was retained still reads");
    assert_eq!(body["truncated"], false);

    // The node is back: the processes are watched again.
    heartbeat_at(&app, &node, now()).await?;
    let (_, body) = send(list("live")).await?;
    assert_eq!(body["processes"].as_array().map(Vec::len), Some(2), "{body}");

    // Output older than its retention: obs-1's chunk is past its TTL but not yet removed, and
    // obs-2's first chunk was removed by the table.
    let chunks = |n: u32| {
        app.store
            .dynamo
            .query()
            .table_name(&app.store.names.telemetry_table)
            .key_condition_expression("PK = :pk AND begins_with(SK, :p)")
            .expression_attribute_values(":pk", AttributeValue::S(format!("SANDBOX#{id}")))
            .expression_attribute_values(":p", AttributeValue::S(format!("CHUNK#obs-{n}#")))
            .send()
    };
    let first = chunks(1).await?.items.unwrap_or_default();
    assert_eq!(first.len(), 1);
    let sk = first[0].get("SK").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
    set_attribute_in(
        &app,
        &app.store.names.telemetry_table,
        format!("SANDBOX#{id}"),
        sk,
        "expires_at",
        Some(AttributeValue::N((now().unix_seconds() - 1).to_string())),
    )
    .await?;
    let second = chunks(2).await?.items.unwrap_or_default();
    assert_eq!(second.len(), 2);
    let sk = second[0].get("SK").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
    app.store
        .dynamo
        .delete_item()
        .table_name(&app.store.names.telemetry_table)
        .key("PK", AttributeValue::S(format!("SANDBOX#{id}")))
        .key("SK", AttributeValue::S(sk))
        .send()
        .await?;
    let (_, body) = send(read(1)).await?;
    assert_eq!(body["chunks"].as_array().map(Vec::len), Some(0), "{body}");
    assert_eq!(body["truncated"], true, "expired output is lost output: {body}");
    let (_, body) = send(read(2)).await?;
    let texts: Vec<&str> =
        body["chunks"].as_array().into_iter().flatten().filter_map(|c| c["data"].as_str()).collect();
    assert_eq!(texts, vec![base64::engine::general_purpose::STANDARD.encode("second")], "{body}");
    assert_eq!(body["truncated"], true, "{body}");
    Ok(())
}

#[tokio::test]
async fn a_pid_reused_after_a_gap_shows_the_new_process() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let (_, node) = register_node(&app).await?;
    let at = now();
    heartbeat_at(&app, &node, at).await?;
    let sandbox = Sandbox {
        id: SandboxId::from_random(agentplane_api::edge::random()?),
        project_id: tenant.project_id.parse()?,
        node_id: node,
        started_at: at,
        lifecycle: Lifecycle::start(at, 3600),
        metadata: Default::default(),
        env_vars: Default::default(),
        isolation: Default::default(),
        session_id: None,
        envd_token_sealed: None,
    };
    app.store.sandboxes().create(&sandbox).await?;
    let id = sandbox.id.clone();
    // A daemon restart finds pid 77 running; a second restart finds pid 77 again, now another
    // program (the first ended unseen and its pid was reused).
    let resumed = |at| NodeEvent::ObservationResumed { sandbox_id: id.clone(), at };
    report(&app, &node, "conn-2", vec![resumed(at), seen(&id, 77, "old-worker", at)]).await?;
    let later = at.plus_seconds(30);
    report(&app, &node, "conn-3", vec![resumed(later), seen(&id, 77, "new-worker", later)]).await?;

    let (status, body) =
        send(app.sandbox(&tenant.key, Method::GET, &format!("/sandboxes/{id}/processes?state=live"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let processes = body["processes"].as_array().cloned().unwrap_or_default();
    assert_eq!(processes.len(), 1, "{body}");
    let p = &processes[0];
    assert_eq!(p["processId"], "live-77");
    assert_eq!(p["config"]["cmd"], "new-worker", "the pid names the process seen now: {p}");
    assert_eq!((p["state"].as_str(), p["observed"].as_bool()), (Some("running"), Some(false)));
    assert_eq!(p["startedAt"], later.rfc3339());
    Ok(())
}

#[tokio::test]
async fn batched_sample_writes_write_each_sample_once() -> R {
    use agentplane_domain::SessionId;
    use agentplane_domain::telemetry::sample::Reason;
    use agentplane_domain::telemetry::{
        AllocationId, EnvironmentId, RuntimeSample, SampleAllocation, SampleStatus,
    };

    let app = TestApp::spawn().await?;
    let session = SessionId::from_random(agentplane_api::edge::random()?);
    let environment = EnvironmentId::from_random(agentplane_api::edge::random()?);
    let at = now();
    let interval = at.unix_seconds() - at.unix_seconds().rem_euclid(60);
    let rows: Vec<(SessionId, i64, RuntimeSample)> = (0..150u8)
        .map(|n| {
            let sample = RuntimeSample {
                sampled_at: at,
                allocation: Some(SampleAllocation {
                    allocation_id: AllocationId::from_random([n; 16]),
                    environment_id: environment,
                    provider_type: "local".into(),
                    compute_started_at: None,
                }),
                status: SampleStatus::Unavailable { reason: Reason::SampleUnavailable },
                token_usage: None,
            };
            (session, interval, sample)
        })
        .collect();
    // Some samples of the interval exist already (an overlapping pass wrote them).
    for (session, interval, sample) in rows.iter().skip(90).step_by(2) {
        assert!(app.store.telemetry().put_sample(session, *interval, sample).await?);
    }
    let results = app.store.telemetry().put_samples(&rows).await;
    let written = results.iter().filter(|r| matches!(r, Ok(true))).count();
    let existing = results.iter().filter(|r| matches!(r, Ok(false))).count();
    assert_eq!((written, existing), (120, 30), "each sample once, the existing ones left alone");
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result.as_ref().ok(), Some(&!(i >= 90 && (i - 90) % 2 == 0)), "sample {i}");
    }
    let again = app.store.telemetry().put_samples(&rows).await;
    assert!(again.iter().all(|r| matches!(r, Ok(false))), "a repeated pass writes nothing");
    let stored = app.store.telemetry().samples(&session, 0, i64::MAX / 2).await?;
    assert_eq!(stored.samples.len(), 150);
    Ok(())
}
