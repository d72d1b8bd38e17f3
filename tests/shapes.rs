//! Stored shapes across releases. `tests/fixtures/shapes/<release>.json` holds every item one
//! scenario left in the tables, as that release's code wrote them (DynamoDB JSON): a project
//! and its key, an agent with a published version, a session with a completed turn, a session
//! paused on an approval, a webhook endpoint (its secret sealed), a Platform environment with a
//! session and a stopped Run. This code must read every release's items: the fixture is loaded
//! into fresh tables and read back through the API with the key the fixture recorded, and the
//! paused turn is carried on. A stored shape that changes fails
//! `the_shapes_this_code_writes_are_in_the_latest_fixture` until the release that changes it
//! checks in its own fixture (`AGENTPLANE_WRITE_SHAPES=1 cargo test -p agentplane-tests --test
//! suite -- shapes::`), with a migration where old items need one, and its CHANGELOG entry.
// Test code: a broken fixture should fail loudly where it is read.
#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use agentplane_api::App;
use agentplane_engine::webhooks::{SealKey, WebhookConfig};
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, fresh_store, send};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// The sealing key of the scenario's webhook secrets (a fixture's, like its project key).
const SEALING_TEXT: &str = "agentplane stored-shape fixtures: not a production key";

/// The releases whose items this code reads, oldest first; the last is the latest shape.
const RELEASES: &[&str] = &["0.1.0", "0.2.0"];

fn fixture_path(release: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/shapes/{release}.json"))
}

fn webhooks() -> WebhookConfig {
    let key = SealKey::from_secret_text(SEALING_TEXT).expect("key");
    WebhookConfig::new(Some(Arc::new(key)), agentplane_tests::loopback_receivers())
}

fn configure(app: App) -> App {
    app.with_webhooks(webhooks())
}

// DynamoDB JSON, the format `aws dynamodb` prints.
fn to_json(v: &AttributeValue) -> Value {
    match v {
        AttributeValue::S(s) => json!({"S": s}),
        AttributeValue::N(n) => json!({"N": n}),
        AttributeValue::Bool(b) => json!({"BOOL": b}),
        AttributeValue::Null(_) => json!({"NULL": true}),
        AttributeValue::B(b) => json!({"B": base64::engine::general_purpose::STANDARD.encode(b.as_ref())}),
        AttributeValue::Ss(s) => json!({"SS": s}),
        AttributeValue::Ns(n) => json!({"NS": n}),
        AttributeValue::Bs(b) => json!({"BS": b
            .iter()
            .map(|b| base64::engine::general_purpose::STANDARD.encode(b.as_ref()))
            .collect::<Vec<_>>()}),
        AttributeValue::L(l) => json!({"L": l.iter().map(to_json).collect::<Vec<_>>()}),
        AttributeValue::M(m) => {
            json!({"M": m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect::<serde_json::Map<_, _>>()})
        }
        other => panic!("an attribute type the fixtures do not know: {other:?}"),
    }
}

fn from_json(v: &Value) -> AttributeValue {
    let (kind, inner) = v.as_object().and_then(|o| o.iter().next()).expect("a typed attribute");
    let strings = |v: &Value| -> Vec<String> {
        v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_owned)).collect()
    };
    let blob = |s: &str| Blob::new(base64::engine::general_purpose::STANDARD.decode(s).expect("base64"));
    match kind.as_str() {
        "S" => AttributeValue::S(inner.as_str().unwrap_or_default().to_owned()),
        "N" => AttributeValue::N(inner.as_str().unwrap_or_default().to_owned()),
        "BOOL" => AttributeValue::Bool(inner.as_bool().unwrap_or_default()),
        "NULL" => AttributeValue::Null(true),
        "B" => AttributeValue::B(blob(inner.as_str().unwrap_or_default())),
        "SS" => AttributeValue::Ss(strings(inner)),
        "NS" => AttributeValue::Ns(strings(inner)),
        "BS" => AttributeValue::Bs(strings(inner).iter().map(|s| blob(s)).collect()),
        "L" => AttributeValue::L(inner.as_array().into_iter().flatten().map(from_json).collect()),
        "M" => AttributeValue::M(
            inner.as_object().into_iter().flatten().map(|(k, v)| (k.clone(), from_json(v))).collect(),
        ),
        other => panic!("unknown attribute type {other}"),
    }
}

/// Every item of a table (a scan, every page), sorted by key so a fixture diffs well.
async fn scan(app: &TestApp, table: &str) -> anyhow::Result<Vec<Value>> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let page = app.store.dynamo.scan().table_name(table).set_exclusive_start_key(start).send().await?;
        for item in page.items() {
            let object: serde_json::Map<String, Value> = item
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .collect();
            items.push(Value::Object(object));
        }
        start = page.last_evaluated_key().cloned();
        if start.is_none() {
            break;
        }
    }
    items.sort_by_key(|i| format!("{}|{}", i["PK"], i["SK"]));
    Ok(items)
}

async fn dump(app: &TestApp) -> anyhow::Result<Value> {
    let names = &app.store.names;
    Ok(json!({
        "main": scan(app, &names.main_table).await?,
        "events": scan(app, &names.events_table).await?,
        "telemetry": scan(app, &names.telemetry_table).await?,
    }))
}

/// The scenario: what a release writes through its surfaces. The ids and the key it made.
async fn scenario(app: &TestApp, model: &ScriptedModel) -> anyhow::Result<Value> {
    let tenant = app.tenant().await?;
    let key = tenant.key.clone();
    let (status, agent) = send(app.client(&key, Method::POST, "/agents").json(&json!({
        "name": "shapes", "model": "gpt-4o-mini", "instructions": "Be brief.", "tools": ["add"],
        "config": {"humanInTheLoop": {"tool_approvals": ["add"]}}
    })))
    .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{agent}");
    let agent = agent["id"].as_str().unwrap_or_default().to_owned();
    let (status, body) = send(app.client(&key, Method::POST, &format!("/agents/{agent}/publish"))).await?;
    anyhow::ensure!(status.is_success(), "{body}");

    model.push(Reply::text("Stored as it was"));
    let (status, talked) =
        send(app.client(&key, Method::POST, "/responses").json(&json!({"agent": agent, "input": "hello"})))
            .await?;
    anyhow::ensure!(talked["status"] == "completed", "{status} {talked}");
    model.push(Reply::tool("a1", "add", &json!({"a": 2, "b": 3})));
    let (status, paused) = send(
        app.client(&key, Method::POST, "/responses").json(&json!({"agent": agent, "input": "What is 2+3?"})),
    )
    .await?;
    anyhow::ensure!(paused["status"] == "requires_action", "{status} {paused}");

    let (status, endpoint) = send(app.client(&key, Method::POST, "/webhooks").json(&json!({
        "url": "http://127.0.0.1:9/hook", "eventTypes": ["agent_run.succeeded"]
    })))
    .await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{endpoint}");

    let env = app.made(&key, "/environments").await?;
    let platform_session = app.made(&key, &format!("/environments/{env}/sessions")).await?;
    let runs = format!("/environments/{env}/sessions/{platform_session}/runs");
    let (status, run) =
        send(app.v1(&key, Method::POST, &runs).json(&json!({"model": "gpt-test", "input": "Fix it"})))
            .await?;
    anyhow::ensure!(status == StatusCode::ACCEPTED, "{run}");
    let run = run["data"]["id"].as_str().unwrap_or_default().to_owned();
    // Nobody consumes the runs queue here: still queued, it stops at once.
    let (status, body) =
        send(app.v1(&key, Method::POST, &format!("{runs}/{run}/stop")).json(&json!({}))).await?;
    anyhow::ensure!(status.is_success(), "{body}");

    Ok(json!({
        "key": key, "agent": agent,
        "talked": talked["session_id"], "waiting": paused["session_id"],
        "action": paused["required_action"]["actions"][0]["id"],
        "endpoint": endpoint["id"], "endpoint_secret": endpoint["secret"],
        "env": env, "platform_session": platform_session, "run": run,
    }))
}

async fn written_now() -> anyhow::Result<(Value, Value)> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model_without_runs_consumer_and(&model, configure).await?;
    let ids = scenario(&app, &model).await?;
    Ok((ids, dump(&app).await?))
}

/// An item's kind: its keys with every id-like segment (one holding a digit) replaced by `*`.
fn kind(item: &Value) -> String {
    let pattern = |key: &str| -> String {
        let s = item[key]["S"].as_str().unwrap_or_default();
        s.split('#')
            .map(|seg| if seg.chars().any(|c| c.is_ascii_digit()) { "*" } else { seg })
            .collect::<Vec<_>>()
            .join("#")
    };
    format!("{} / {}", pattern("PK"), pattern("SK"))
}

/// Per table and kind, the attributes (name and type) its items carry.
fn shapes(tables: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (table, items) in tables.as_object().into_iter().flatten() {
        for item in items.as_array().into_iter().flatten() {
            let attrs = out.entry(format!("{table}: {}", kind(item))).or_default();
            for (name, value) in item.as_object().into_iter().flatten() {
                let ty = value.as_object().and_then(|o| o.keys().next().cloned()).unwrap_or_default();
                attrs.insert(format!("{name}: {ty}"));
            }
        }
    }
    out
}

fn read_fixture(release: &str) -> Value {
    let text = std::fs::read_to_string(fixture_path(release))
        .unwrap_or_else(|e| panic!("{}: {e}", fixture_path(release).display()));
    serde_json::from_str(&text).expect("fixture JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_shapes_this_code_writes_are_in_the_latest_fixture() -> R {
    let (ids, tables) = written_now().await?;
    let latest = RELEASES.last().expect("a release");
    if std::env::var("AGENTPLANE_WRITE_SHAPES").is_ok_and(|v| v == "1") {
        let fixture = json!({"release": latest, "ids": ids, "tables": tables});
        std::fs::create_dir_all(fixture_path(latest).parent().expect("dir"))?;
        std::fs::write(fixture_path(latest), serde_json::to_string_pretty(&fixture)? + "\n")?;
        eprintln!("wrote {}", fixture_path(latest).display());
        return Ok(());
    }
    let stored = shapes(&read_fixture(latest)["tables"]);
    let now = shapes(&tables);
    let mut changed = Vec::new();
    for (kind, attrs) in &now {
        match stored.get(kind) {
            None => changed.push(format!("a new kind of item: {kind} {attrs:?}")),
            Some(known) => {
                let new: Vec<_> = attrs.difference(known).collect();
                if !new.is_empty() {
                    changed.push(format!("{kind} gained {new:?}"));
                }
            }
        }
    }
    assert!(
        changed.is_empty(),
        "the stored shape changed since {latest}: add this release's fixture (AGENTPLANE_WRITE_SHAPES=1 after \
         adding it to RELEASES), a migration where older items need one, and a CHANGELOG entry:\n{changed:#?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_releases_items_read_back_and_carry_on() -> R {
    for release in RELEASES {
        let fixture = read_fixture(release);
        let store = fresh_store().await?;
        for (table, name) in [
            ("main", &store.names.main_table),
            ("events", &store.names.events_table),
            ("telemetry", &store.names.telemetry_table),
        ] {
            for item in fixture["tables"][table].as_array().into_iter().flatten() {
                let item: HashMap<String, AttributeValue> =
                    item.as_object().into_iter().flatten().map(|(k, v)| (k.clone(), from_json(v))).collect();
                store.dynamo.put_item().table_name(name).set_item(Some(item)).send().await?;
            }
        }
        let model = ScriptedModel::start().await?;
        let app = TestApp::serve_with_model_and(store, &model, configure).await?;
        let ids = &fixture["ids"];
        let text = |k: &str| ids[k].as_str().unwrap_or_default().to_owned();
        let key = text("key");

        let (status, agent) =
            send(app.client(&key, Method::GET, &format!("/agents/{}", text("agent")))).await?;
        assert_eq!(status, StatusCode::OK, "{release}: {agent}");
        let (status, versions) =
            send(app.client(&key, Method::GET, &format!("/agents/{}/versions", text("agent")))).await?;
        assert_eq!(status, StatusCode::OK, "{release}: {versions}");
        assert!(versions.to_string().contains("\"version\":1"), "{release}: {versions}");

        let (status, events) =
            send(app.client(&key, Method::GET, &format!("/sessions/{}/events?limit=100", text("talked"))))
                .await?;
        assert_eq!(status, StatusCode::OK, "{release}: {events}");
        assert!(events.to_string().contains("Stored as it was"), "{release}: {events}");

        // The paused turn carries on after an approval.
        let (waiting, action) = (text("waiting"), text("action"));
        model.push(Reply::text("Read back: 5"));
        let (status, body) = send(
            app.client(&key, Method::POST, &format!("/sessions/{waiting}/actions/{action}"))
                .json(&json!({"decision": "approve"})),
        )
        .await?;
        assert!(status.is_success(), "{release}: {status} {body}");
        let mut ended = false;
        for _ in 0..200 {
            let (_, events) =
                send(app.client(&key, Method::GET, &format!("/sessions/{waiting}/events?limit=100"))).await?;
            if events.to_string().contains("Read back: 5") {
                ended = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(ended, "{release}: the paused turn never carried on");

        let (status, endpoint) =
            send(app.client(&key, Method::GET, &format!("/webhooks/{}", text("endpoint")))).await?;
        assert_eq!(status, StatusCode::OK, "{release}: {endpoint}");
        assert_eq!(endpoint["url"], "http://127.0.0.1:9/hook", "{release}: {endpoint}");
        // Its sealed secret still opens: a test delivery (to a receiver here) is signed with
        // the secret handed out when the release made it.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        let (tx, mut rx) =
            tokio::sync::mpsc::unbounded_channel::<(axum::http::HeaderMap, axum::body::Bytes)>();
        let router = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let _ = tx.send((headers, body));
                async { "ok" }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, router).await });
        let endpoint_path = format!("/webhooks/{}", text("endpoint"));
        let (status, body) =
            send(app.client(&key, Method::PATCH, &endpoint_path).json(&json!({"url": url}))).await?;
        assert_eq!(status, StatusCode::OK, "{release}: {body}");
        let (status, attempt) =
            send(app.client(&key, Method::POST, &format!("{endpoint_path}/test"))).await?;
        assert_eq!(status, StatusCode::OK, "{release}: {attempt}");
        let (headers, body) =
            tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv()).await?.expect("a delivery");
        let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        let secret = agentplane_domain::webhook::signature::SigningSecret::parse(&text("endpoint_secret"))
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let expected = secret.sign(&header("webhook-id"), header("webhook-timestamp").parse()?, &body);
        assert!(
            header("webhook-signature").split(' ').any(|s| s == expected),
            "{release}: the delivery is not signed with the stored secret"
        );

        let run = format!(
            "/environments/{}/sessions/{}/runs/{}",
            text("env"),
            text("platform_session"),
            text("run")
        );
        let (status, got) = send(app.v1(&key, Method::GET, &run)).await?;
        assert_eq!(status, StatusCode::OK, "{release}: {got}");
        assert_eq!(got["data"]["status"], "stopped", "{release}: {got}");
    }
    Ok(())
}
