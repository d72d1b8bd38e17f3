//! The Core node reads: the node list, and one node's host and history (complete UTC buckets,
//! the bucket in progress left out, maxima/minima, nulls without data), validated end to end by
//! the strict admin client.

use agentplane_domain::Timestamp;
use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::host::HostObservation;
use agentplane_domain::telemetry::node::NodeRange;
use agentplane_tests::{TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

fn observation(at_s: i64, cpu: Option<f64>, available_memory: u64, disk: u64) -> HostObservation {
    HostObservation {
        connection_id: "conn-1".into(),
        observed_at: Timestamp::from_unix_seconds(at_s),
        cpu: None,
        cpu_utilization: cpu,
        total_memory_bytes: Some(16_000),
        available_memory_bytes: Some(available_memory),
        available_disk_bytes: Some(disk),
        effective_cpu_cores: Some(2.0),
        sandboxes: Vec::new(),
    }
}

#[tokio::test]
async fn a_node_read_reports_its_last_heartbeat_and_complete_buckets() -> R {
    let app = TestApp::spawn().await?;
    let (status, node) =
        send(app.core(Method::POST, "/core/v1/sandbox/nodes").json(&json!({"name": "host-a"}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{node}");
    let id = str_field(&node, "id")?;
    let node_id: NodeId = id.parse()?;

    // Before any heartbeat: every host value is null, every bucket present and empty.
    let (status, body) = send(app.core(Method::GET, &format!("/core/v1/sandbox/nodes/{id}"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["host"]["observed_at"], Value::Null);
    assert_eq!(body["history"]["resolution_seconds"], 60);
    assert_eq!(body["history"]["points"].as_array().map(Vec::len), Some(60));

    // Two heartbeats in one complete minute two minutes ago, one in the minute in progress. The
    // minute in progress must still be in progress when the read comes: near a minute's end,
    // wait for the next one (a loaded machine once crossed the boundary in between).
    let unix_s = || -> anyhow::Result<i64> {
        Ok(i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs())?)
    };
    let into = unix_s()?.rem_euclid(60);
    if into > 30 {
        tokio::time::sleep(std::time::Duration::from_secs(u64::try_from(61 - into)?)).await;
    }
    let now_s = unix_s()?;
    let minute = now_s.div_euclid(60) * 60;
    let old = minute - 120;
    app.store.nodes().record_heartbeat(&node_id, &observation(old + 5, None, 9_000, 500)).await?;
    app.store.nodes().record_heartbeat(&node_id, &observation(old + 35, Some(0.4), 6_000, 700)).await?;
    app.store.nodes().record_heartbeat(&node_id, &observation(minute + 1, Some(0.9), 1_000, 100)).await?;

    let (status, body) =
        send(app.core(Method::GET, &format!("/core/v1/sandbox/nodes/{id}?range=1h"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    // host is the last heartbeat, the one in progress included.
    assert_eq!(body["host"]["cpu_utilization"], 0.9);
    assert_eq!(body["host"]["available_memory_bytes"], 1_000);
    assert_eq!(body["host"]["effective_cpu_cores"], 2.0);
    let points = body["history"]["points"].as_array().cloned().unwrap_or_default();
    assert_eq!(points.len(), 60, "every bucket of the range, the one in progress left out");
    let filled: Vec<&Value> = points.iter().filter(|p| !p["cpu_utilization_max"].is_null()).collect();
    assert_eq!(filled.len(), 1, "{points:?}");
    assert_eq!(filled[0]["cpu_utilization_max"], 0.4);
    assert_eq!(filled[0]["memory_used_bytes_max"], 16_000 - 6_000);
    assert_eq!(filled[0]["available_disk_bytes_min"], 500);
    let with_disk = points.iter().filter(|p| !p["available_disk_bytes_min"].is_null()).count();
    assert_eq!(with_disk, 1, "no interpolation, no backfill");

    for range in ["6h", "24h"] {
        let (_, body) =
            send(app.core(Method::GET, &format!("/core/v1/sandbox/nodes/{id}?range={range}"))).await?;
        let expected = if range == "6h" { (300, 72) } else { (900, 96) };
        assert_eq!(body["history"]["resolution_seconds"], expected.0);
        assert_eq!(body["history"]["points"].as_array().map(Vec::len), Some(expected.1));
    }

    // The strict admin client accepts the real answer.
    let client = agentplane_admin_client::SandboxAdminClient::new(&app.base, &app.core_key);
    let detail = client.retrieve_node(node_id, NodeRange::parse("1h").unwrap_or_default()).await?;
    assert_eq!(detail.id, node_id);

    let (status, list) = send(app.core(Method::GET, "/core/v1/sandbox/nodes")).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["data"][0]["id"], id.as_str());
    Ok(())
}

#[tokio::test]
async fn node_reads_refuse_bad_parameters_ids_and_keys() -> R {
    let app = TestApp::spawn().await?;
    let (_, node) = send(app.core(Method::POST, "/core/v1/sandbox/nodes").json(&json!({}))).await?;
    let id = str_field(&node, "id")?;
    for query in ["range=2h", "range=1h&range=6h", "limit=5", "range="] {
        let (status, body) =
            send(app.core(Method::GET, &format!("/core/v1/sandbox/nodes/{id}?{query}"))).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request");
    }
    let (status, body) = send(app.core(Method::GET, "/core/v1/sandbox/nodes/not-a-node")).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request");
    let (status, body) =
        send(app.core(Method::GET, &format!("/core/v1/sandbox/nodes/{}", uuid::Uuid::new_v4()))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    let tenant = app.tenant().await?;
    for path in ["/core/v1/sandbox/nodes".to_owned(), format!("/core/v1/sandbox/nodes/{id}")] {
        let (status, body) = send(app.request(Method::GET, &path).bearer_auth(&tenant.key)).await?;
        assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_admin_key");
    }
    Ok(())
}
