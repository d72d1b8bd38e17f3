//! The client against a canned server on 127.0.0.1:0: valid responses built with the domain's
//! builders are accepted; each corruption is rejected with the right code.

// A test binary: a failed unwrap in a helper is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use agentplane_admin_client::{
    AdminClient, AdminClientError, ListRuntimeObservations, RuntimeHistoryRequest, SandboxAdminClient,
};
use agentplane_domain::page::Order;
use agentplane_domain::session::EnvironmentMode;
use agentplane_domain::telemetry::node::{NodeObservation, host_observation, node_history};
use agentplane_domain::telemetry::observation::ProviderSample;
use agentplane_domain::telemetry::observation_wire::{ByteUsage, RuntimeObservationRow};
use agentplane_domain::telemetry::{
    AllocationId, AllocationRecord, AllocationState, ComputeStart, EnvironmentId, HistoryQuery, NodeId,
    NodeRange, ObservationRecords, ProviderRead, RuntimeObservationList, RuntimeSample, SampleAllocation,
    SampleReadings, SampleStatus, SamplingInterval, TokenUsage, build_runtime_history, runtime_observation,
};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};

const KEY: &str = "core-key-for-tests";
const START: i64 = 1_789_951_200;
const END: i64 = START + 3600;
const NOW: i64 = 1_790_326_830;

#[derive(Default)]
struct Shared {
    reply: Mutex<(u16, String)>,
    seen: Mutex<Vec<(String, Option<String>)>>,
}

async fn reply(State(shared): State<Arc<Shared>>, uri: Uri, headers: HeaderMap) -> impl IntoResponse {
    let auth = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_owned);
    shared.seen.lock().unwrap().push((uri.to_string(), auth));
    let (status, body) = shared.reply.lock().unwrap().clone();
    (StatusCode::from_u16(status).unwrap(), [(header::CONTENT_TYPE, "application/json")], body)
}

struct Server {
    base: String,
    shared: Arc<Shared>,
}

impl Server {
    async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let app = Router::new().fallback(reply).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { base, shared }
    }

    fn answer(&self, status: u16, body: &Value) {
        *self.shared.reply.lock().unwrap() = (status, body.to_string());
    }

    fn seen(&self) -> Vec<(String, Option<String>)> {
        self.shared.seen.lock().unwrap().clone()
    }

    fn admin(&self) -> AdminClient {
        AdminClient::new(&format!("{}/", self.base), KEY)
    }
}

fn project() -> ProjectId {
    ProjectId::from_random([5; 16])
}

fn session(n: u8) -> SessionId {
    SessionId::from_random([n; 16])
}

fn allocation() -> AllocationRecord {
    AllocationRecord {
        allocation_id: AllocationId::from_random([3; 16]),
        device_id: None,
        provider_type: "e2b".into(),
        state: AllocationState::Running,
        created_at: Timestamp::from_unix_seconds(START),
    }
}

/// An observed E2B row with disk (list form).
fn observed_row(n: u8) -> RuntimeObservationRow {
    let alloc = allocation();
    let records = ObservationRecords {
        session_id: session(n),
        mode: EnvironmentMode::OpenaiHosted,
        environment_id: Some(EnvironmentId::from_random([2; 16])),
        allocation: Some(&alloc),
    };
    let read = ProviderRead::Sampled(ProviderSample {
        observed_at: Timestamp::from_unix_seconds(END - 5),
        started_at: Some(Timestamp::from_unix_seconds(START + 20)),
        readings: SampleReadings {
            utilization_ratio: Some(0.5),
            capacity_cores: Some(2.0),
            memory_usage_bytes: Some(1024),
            memory_limit_bytes: Some(4096),
            ..SampleReadings::default()
        },
        disk: Some(ByteUsage { usage_bytes: Some(10), limit_bytes: Some(100) }),
    });
    let observation = runtime_observation(&records, Some(&read), Timestamp::from_unix_seconds(END)).unwrap();
    RuntimeObservationRow { project_id: project(), observation }
}

fn none_row(n: u8) -> RuntimeObservationRow {
    let records = ObservationRecords {
        session_id: session(n),
        mode: EnvironmentMode::None,
        environment_id: None,
        allocation: None,
    };
    let observation = runtime_observation(&records, None, Timestamp::from_unix_seconds(END)).unwrap();
    RuntimeObservationRow { project_id: project(), observation }
}

fn valid_page() -> Value {
    serde_json::to_value(RuntimeObservationList::new(vec![observed_row(1), none_row(2)], false)).unwrap()
}

fn valid_observation() -> Value {
    serde_json::to_value(observed_row(1).observation.split().0).unwrap()
}

fn valid_history() -> Value {
    let alloc = SampleAllocation {
        allocation_id: AllocationId::from_random([3; 16]),
        environment_id: EnvironmentId::from_random([2; 16]),
        provider_type: "docker".into(),
        compute_started_at: ComputeStart::new(START - 7, 250),
    };
    let sample = |at: i64, cpu: f64| RuntimeSample {
        sampled_at: Timestamp::from_unix_seconds(at),
        allocation: Some(alloc.clone()),
        status: SampleStatus::Observed {
            readings: SampleReadings {
                cpu_seconds_total: Some(cpu),
                capacity_cores: Some(2.0),
                memory_usage_bytes: Some(1),
                memory_limit_bytes: Some(2),
                ..SampleReadings::default()
            },
        },
        token_usage: Some(TokenUsage { input_tokens: cpu as u64, output_tokens: 3 }),
    };
    let samples = [sample(START + 10, 1.0), sample(START + 40, 31.0), sample(START + 700, 40.0)];
    let q = HistoryQuery::new(START, END, Some(60)).unwrap();
    let interval = SamplingInterval::from_seconds(30).unwrap();
    serde_json::to_value(
        build_runtime_history(session(1), q, interval, Timestamp::from_unix_seconds(END + 1), &samples)
            .unwrap(),
    )
    .unwrap()
}

fn history_request() -> RuntimeHistoryRequest {
    RuntimeHistoryRequest { start: START, end: END, max_points: Some(60) }
}

fn node_id() -> NodeId {
    NodeId::from_random([8; 16])
}

fn valid_node() -> Value {
    let obs = NodeObservation {
        observed_at: Timestamp::from_unix_seconds(NOW - 20),
        effective_cpu_cores: Some(4.0),
        cpu_utilization: Some(0.35),
        total_memory_bytes: Some(17_179_869_184),
        available_memory_bytes: Some(8_589_934_592),
        available_disk_bytes: Some(107_374_182_400),
    };
    json!({
        "id": node_id().to_string(),
        "object": "sandbox.node",
        "online": true,
        "host": host_observation(Some(&obs)),
        "history": node_history(NodeRange::OneHour, Timestamp::from_unix_seconds(NOW), &[obs]),
    })
}

/// Replaces the value at `pointer`, or adds it when its parent is an object without that key.
fn set(mut value: Value, pointer: &str, new: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    match value.pointer_mut(parent).unwrap_or_else(|| panic!("no {parent}")) {
        Value::Object(map) => {
            map.insert(key.to_owned(), new);
        }
        Value::Array(items) => items[key.parse::<usize>().unwrap()] = new,
        other => panic!("{parent} is {other}"),
    }
    value
}

fn remove(mut value: Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    value.pointer_mut(parent).and_then(Value::as_object_mut).unwrap().remove(key).unwrap();
    value
}

fn code<T: std::fmt::Debug>(result: Result<T, AdminClientError>) -> String {
    match result {
        Ok(value) => format!("accepted: {value:?}"),
        Err(e) => e.code().to_owned(),
    }
}

#[tokio::test]
async fn list_accepts_a_valid_page_and_sends_the_core_key_and_parameters() {
    let server = Server::start().await;
    server.answer(200, &valid_page());
    let params =
        ListRuntimeObservations { after: Some(session(9)), limit: Some(50), order: Some(Order::Asc) };
    let page = server.admin().list_runtime_observations(params).await.unwrap();
    assert_eq!(page.data.len(), 2);
    let seen = server.seen();
    assert_eq!(
        seen[0].0,
        format!("/core/v1/sandbox/runtime-observations?after={}&limit=50&order=asc", session(9))
    );
    assert_eq!(seen[0].1.as_deref(), Some("Bearer core-key-for-tests"));
}

#[tokio::test]
async fn list_rejects_a_page_with_one_bad_row_as_invalid_admin_response() {
    let server = Server::start().await;
    let corruptions = [
        ("unknown row field", set(valid_page(), "/data/1/extra", json!(1))),
        ("unknown observation field", set(valid_page(), "/data/0/observation/extra", json!(1))),
        ("missing disk", remove(valid_page(), "/data/0/observation/disk")),
        (
            "observed row with a reason",
            set(valid_page(), "/data/0/observation/reason", json!("sample_timeout")),
        ),
        (
            "disk on an unsupported row",
            set(valid_page(), "/data/1/observation/disk", json!({"usage_bytes": 1, "limit_bytes": 2})),
        ),
        ("unknown mode", set(valid_page(), "/data/1/observation/mode", json!("cloud"))),
        ("bad project id", set(valid_page(), "/data/0/project_id", json!("P-1"))),
        ("first_id", set(valid_page(), "/first_id", json!(session(2).to_string()))),
        ("last_id null", set(valid_page(), "/last_id", Value::Null)),
        ("object", set(valid_page(), "/object", json!("page"))),
        ("has_more type", set(valid_page(), "/has_more", json!("no"))),
        ("negative memory", set(valid_page(), "/data/0/observation/memory/usage_bytes", json!(-1))),
        ("zero disk limit", set(valid_page(), "/data/0/observation/disk/limit_bytes", json!(0))),
        (
            "unsafe integer",
            set(valid_page(), "/data/0/observation/memory/usage_bytes", json!(9_007_199_254_740_992u64)),
        ),
        ("duplicate row", {
            let mut page = valid_page();
            let row = page["data"][0].clone();
            page["data"][1] = row;
            set(page, "/last_id", json!(session(1).to_string()))
        }),
    ];
    for (name, body) in corruptions {
        server.answer(200, &body);
        let result = server.admin().list_runtime_observations(ListRuntimeObservations::default()).await;
        assert_eq!(code(result), "invalid_admin_response", "{name}");
    }
}

#[tokio::test]
async fn list_refuses_an_invalid_limit_without_sending() {
    let server = Server::start().await;
    let params = ListRuntimeObservations { limit: Some(101), ..ListRuntimeObservations::default() };
    let result = server.admin().list_runtime_observations(params).await;
    assert_eq!(code(result), "invalid_request");
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn observation_read_accepts_a_valid_observation() {
    let server = Server::start().await;
    server.answer(200, &valid_observation());
    let o = server.admin().retrieve_runtime_observation(project(), session(1)).await.unwrap();
    assert_eq!(o.session_id, session(1));
    assert_eq!(
        server.seen()[0].0,
        format!("/core/v1/projects/{}/sessions/{}/runtime-observation", project(), session(1))
    );
}

#[tokio::test]
async fn observation_read_rejects_each_corruption_as_invalid_runtime_observation() {
    let server = Server::start().await;
    let unsupported = serde_json::to_value(none_row(1).observation.split().0).unwrap();
    let corruptions = [
        ("disk on the single read", set(valid_observation(), "/disk", Value::Null)),
        ("missing nullable", remove(valid_observation(), "/started_at")),
        ("id differs", set(valid_observation(), "/id", json!(session(2).to_string()))),
        ("object", set(valid_observation(), "/object", json!("agent.runtime"))),
        ("unknown status", set(valid_observation(), "/status", json!("running"))),
        ("unknown lifecycle", set(valid_observation(), "/lifecycle_state", json!("running"))),
        ("unsupported managed", set(valid_observation(), "/status", json!("unsupported"))),
        ("observed without observed_at", set(valid_observation(), "/observed_at", Value::Null)),
        ("negative timestamp", set(valid_observation(), "/resolved_at", json!(-1))),
        ("fractional timestamp", set(valid_observation(), "/resolved_at", json!(1.5))),
        ("usage_cores set", set(valid_observation(), "/cpu/usage_cores", json!(1.0))),
        ("zero capacity", set(valid_observation(), "/cpu/capacity_cores", json!(0))),
        ("negative ratio", set(valid_observation(), "/cpu/utilization_ratio", json!(-0.5))),
        ("ratio as string", set(valid_observation(), "/cpu/utilization_ratio", json!("0.5"))),
        ("both cpu kinds", set(valid_observation(), "/cpu/usage_seconds_total", json!(3.0))),
        ("connection generation", set(valid_observation(), "/instance/connection_generation", json!(1))),
        ("unknown instance kind", set(valid_observation(), "/instance/kind", json!("vm"))),
        (
            "none with environment",
            set(
                unsupported.clone(),
                "/environment_id",
                json!(EnvironmentId::from_random([2; 16]).to_string()),
            ),
        ),
        ("none with lifecycle", set(unsupported.clone(), "/lifecycle_state", json!("active"))),
        (
            "unsupported with cpu",
            set(
                unsupported,
                "/cpu",
                json!({"usage_seconds_total": 1.0, "capacity_cores": null, "usage_cores": null, "utilization_ratio": null}),
            ),
        ),
        ("not an object", json!([])),
    ];
    for (name, body) in corruptions {
        server.answer(200, &body);
        let result = server.admin().retrieve_runtime_observation(project(), session(1)).await;
        assert_eq!(code(result), "invalid_runtime_observation", "{name}");
    }
}

#[tokio::test]
async fn observation_read_rejects_an_observation_of_another_session() {
    let server = Server::start().await;
    server.answer(200, &valid_observation());
    let result = server.admin().retrieve_runtime_observation(project(), session(2)).await;
    assert_eq!(code(result), "invalid_runtime_observation");
}

#[tokio::test]
async fn server_errors_surface_with_their_status_and_code() {
    let server = Server::start().await;
    server.answer(404, &json!({"error": {"type": "not_found_error", "code": "not_found_error", "message": "no such Session", "param": "session_id"}}));
    let err = server.admin().retrieve_runtime_observation(project(), session(1)).await.unwrap_err();
    assert_eq!((err.status(), err.code()), (Some(404), "not_found_error"));
    server.answer(
        503,
        &json!({"error": {"type": "api_error", "code": "runtime_history_unavailable", "message": "x"}}),
    );
    let err =
        server.admin().retrieve_runtime_history(project(), session(1), history_request()).await.unwrap_err();
    assert_eq!((err.status(), err.code()), (Some(503), "runtime_history_unavailable"));
    assert!(matches!(err, AdminClientError::Api { ref kind, .. } if kind == "api_error"));
    server.answer(500, &json!({"message": "boom"}));
    let err =
        server.admin().retrieve_runtime_history(project(), session(1), history_request()).await.unwrap_err();
    assert_eq!((err.status(), err.code()), (Some(502), "invalid_admin_response"));
}

#[tokio::test]
async fn history_accepts_a_valid_history_and_sends_the_validated_query() {
    let server = Server::start().await;
    server.answer(200, &valid_history());
    let h = server.admin().retrieve_runtime_history(project(), session(1), history_request()).await.unwrap();
    assert_eq!(h.series.len(), 1);
    assert_eq!(
        server.seen()[0].0,
        format!(
            "/core/v1/projects/{}/sessions/{}/runtime-history?start={START}&end={END}&max_points=60",
            project(),
            session(1)
        )
    );
}

#[tokio::test]
async fn history_refuses_an_invalid_query_without_sending() {
    let server = Server::start().await;
    for (start, end, max_points) in [
        (START, START, None),
        (START, START + 86_401, None),
        (-1, 10, None),
        (START, END, Some(1)),
        (START, END, Some(1001)),
    ] {
        let request = RuntimeHistoryRequest { start, end, max_points };
        let result = server.admin().retrieve_runtime_history(project(), session(1), request).await;
        assert_eq!(code(result), "invalid_request");
    }
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn history_rejects_each_corruption_as_invalid_admin_response() {
    let server = Server::start().await;
    let corruptions = [
        ("unknown field", set(valid_history(), "/extra", json!(1))),
        ("unknown point field", set(valid_history(), "/series/0/points/0/extra", json!(1))),
        ("missing nullable", remove(valid_history(), "/series/0/points/0/memory")),
        ("source", set(valid_history(), "/source", json!("live"))),
        ("session", set(valid_history(), "/session_id", json!(session(2).to_string()))),
        ("echoed range", set(valid_history(), "/requested_range/start", json!(START + 1))),
        ("resolution", set(valid_history(), "/resolution_seconds", json!(20))),
        ("bucket off grid", set(valid_history(), "/coverage/buckets/0/start", json!(START + 1))),
        ("bucket past end", set(valid_history(), "/coverage/buckets/1/end", json!(END + 60))),
        ("coverage total", set(valid_history(), "/coverage/sample_count", json!(4))),
        ("bucket counts", set(valid_history(), "/coverage/buckets/0/unavailable_count", json!(1))),
        ("retained start", set(valid_history(), "/coverage/retained_start", json!(START - 1))),
        ("allocation id", set(valid_history(), "/series/0/allocation_id", json!("alloc-1"))),
        (
            "started_at nanoseconds",
            set(valid_history(), "/series/0/started_at/nanoseconds", json!(1_000_000_000)),
        ),
        ("started_at shape", set(valid_history(), "/series/0/started_at", json!(START))),
        ("contributors", set(valid_history(), "/series/0/points/0/cpu/contributor_count", json!(0))),
        ("negative ratio", set(valid_history(), "/series/0/points/0/cpu/utilization_ratio", json!(-1.0))),
        ("point order", {
            let mut h = valid_history();
            let points = h["series"][0]["points"].as_array_mut().unwrap();
            points.reverse();
            h
        }),
        ("token usage order", {
            let mut h = valid_history();
            h["token_usage"].as_array_mut().unwrap().reverse();
            h
        }),
        ("token sampled_at", set(valid_history(), "/token_usage/0/sampled_at", json!(START + 60))),
        ("token fraction", set(valid_history(), "/token_usage/0/input_tokens", json!(1.5))),
        ("too many buckets", {
            let mut h = valid_history();
            let buckets: Vec<Value> = (0..61)
                .map(|i| json!({"start": START + i * 60, "end": START + i * 60 + 60, "first_observed_at": START + i * 60,
                    "last_observed_at": START + i * 60, "observation_count": 1, "observed_count": 1, "unavailable_count": 0}))
                .collect();
            h["coverage"]["buckets"] = Value::Array(buckets);
            h
        }),
    ];
    for (name, body) in corruptions {
        server.answer(200, &body);
        let result = server.admin().retrieve_runtime_history(project(), session(1), history_request()).await;
        assert_eq!(code(result), "invalid_admin_response", "{name}");
    }
}

#[tokio::test]
async fn node_read_accepts_a_valid_node_and_checks_host_and_history() {
    let server = Server::start().await;
    server.answer(200, &valid_node());
    let client = SandboxAdminClient::new(&server.base, KEY);
    let node = client.retrieve_node(node_id(), NodeRange::OneHour).await.unwrap();
    assert!(node.online);
    assert_eq!(node.host.cpu_utilization, Some(0.35));
    assert_eq!(node.history.points.len(), 60);
    assert_eq!(node.node.get("object"), Some(&json!("sandbox.node")));
    assert_eq!(server.seen()[0].0, format!("/core/v1/sandbox/nodes/{}?range=1h", node_id()));

    let corruptions = [
        ("cpu above one", set(valid_node(), "/host/cpu_utilization", json!(1.5))),
        ("unknown host field", set(valid_node(), "/host/extra", json!(1))),
        ("missing host field", remove(valid_node(), "/host/available_disk_bytes")),
        ("observed_at format", set(valid_node(), "/host/observed_at", json!("yesterday"))),
        ("resolution", set(valid_node(), "/history/resolution_seconds", json!(300))),
        ("missing bucket", {
            let mut n = valid_node();
            n["history"]["points"].as_array_mut().unwrap().remove(10);
            n
        }),
        ("unaligned bucket", set(valid_node(), "/history/points/0/start", json!("2026-09-25T08:00:30Z"))),
        ("negative disk", set(valid_node(), "/history/points/59/available_disk_bytes_min", json!(-5))),
        ("another node", set(valid_node(), "/id", json!(NodeId::from_random([9; 16]).to_string()))),
        ("online missing", remove(valid_node(), "/online")),
        ("history missing", remove(valid_node(), "/history")),
    ];
    for (name, body) in corruptions {
        server.answer(200, &body);
        let result = client.retrieve_node(node_id(), NodeRange::OneHour).await;
        assert_eq!(code(result), "invalid_admin_response", "{name}");
    }
}
