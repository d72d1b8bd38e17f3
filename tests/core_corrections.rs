//! Corrections of Core reads: a node's history over a long uptime, the stored identity behind a
//! runtime history, and process state while a node is away.
// Helpers are test code: a broken setup should fail loudly where it happens.
#![allow(clippy::expect_used)]

use agentplane_domain::Timestamp;
use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::host::{HostObservation, SandboxUsage};
use agentplane_domain::telemetry::node::NodeObservation;
use agentplane_tests::{TestApp, send, str_field};
use aws_sdk_dynamodb::types::AttributeValue;
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

async fn set_attribute(
    app: &TestApp,
    pk: String,
    sk: String,
    name: &str,
    value: Option<AttributeValue>,
) -> R {
    let update = app
        .store
        .dynamo
        .update_item()
        .table_name(&app.store.names.main_table)
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
