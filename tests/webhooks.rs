//! Signed webhooks through the client API: endpoints (CRUD, another project's → 404, the cap of
//! 50 under concurrency), real deliveries to a local receiver verified by the Standard Webhooks
//! reference library (Python `standardwebhooks`), rotation overlap, SSRF refusals at create and
//! at delivery, `410 Gone` disabling the endpoint, and a receiver that hangs.

// Helpers (the receiver, the verifier) panic like the tests they serve.
#![allow(clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentplane_api::App;
use agentplane_domain::ProjectId;
use agentplane_domain::webhook::signature::{SigningSecret, sign};
use agentplane_domain::webhook::{self, EndpointFields, EndpointId, StoredSecret};
use agentplane_engine::webhooks::{SealKey, WebhookConfig};
use agentplane_tests::{TestApp, send};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use reqwest::Method;
use serde_json::{Value, json};

fn config(allow_private: bool, timeout: Duration) -> WebhookConfig {
    let key = SealKey::from_bytes(&getrandom_bytes()).expect("key");
    let targets = if allow_private { agentplane_tests::loopback_receivers() } else { Default::default() };
    WebhookConfig { timeout, ..WebhookConfig::new(Some(Arc::new(key)), targets) }
}

fn getrandom_bytes() -> [u8; 32] {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).expect("random");
    b
}

async fn app_with(allow_private: bool, timeout: Duration) -> TestApp {
    TestApp::spawn_with(move |app: App| app.with_webhooks(config(allow_private, timeout))).await.expect("app")
}

/// A request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    headers: HeaderMap,
    body: String,
}

#[derive(Clone, Default)]
struct Behaviour {
    status: Arc<Mutex<u16>>,
    delay: Arc<Mutex<Duration>>,
    got: Arc<Mutex<Vec<Received>>>,
}

/// A local HTTP receiver answering `status` after `delay`, recording what it got.
struct Receiver {
    url: String,
    behaviour: Behaviour,
}

impl Receiver {
    async fn start() -> Self {
        let behaviour = Behaviour::default();
        *behaviour.status.lock().expect("lock") = 200;
        async fn hook(
            State(b): State<Behaviour>,
            headers: HeaderMap,
            body: Bytes,
        ) -> (StatusCode, &'static str) {
            let delay = *b.delay.lock().expect("lock");
            b.got
                .lock()
                .expect("lock")
                .push(Received { headers, body: String::from_utf8_lossy(&body).into() });
            tokio::time::sleep(delay).await;
            let status = *b.status.lock().expect("lock");
            (StatusCode::from_u16(status).expect("status"), "thanks")
        }
        let router =
            axum::Router::new().route("/hook", axum::routing::post(hook)).with_state(behaviour.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self { url, behaviour }
    }

    fn answer(&self, status: u16) {
        *self.behaviour.status.lock().expect("lock") = status;
    }

    fn hang(&self, delay: Duration) {
        *self.behaviour.delay.lock().expect("lock") = delay;
    }

    fn received(&self) -> Vec<Received> {
        self.behaviour.got.lock().expect("lock").clone()
    }
}

/// The tools venv's python (with `standardwebhooks`): `AGENTPLANE_TOOLS_PYTHON`, else the repo's.
fn python() -> String {
    std::env::var("AGENTPLANE_TOOLS_PYTHON")
        .unwrap_or_else(|_| format!("{}/../.localstack/tools/bin/python", env!("CARGO_MANIFEST_DIR")))
}

const VERIFY: &str = r#"
import json, sys
from standardwebhooks.webhooks import Webhook
d = json.load(sys.stdin)
try:
    Webhook(d["secret"]).verify(d["body"], d["headers"])
    print("ok")
except Exception as e:
    print("fail: %s: %s" % (type(e).__name__, e))
"#;

/// What the reference library says of `headers` + `body` under `secret`: `ok` or `fail: …`.
fn verify(secret: &str, headers: &[(&str, String)], body: &str) -> String {
    use std::io::Write as _;
    let headers: serde_json::Map<String, Value> =
        headers.iter().map(|(k, v)| ((*k).to_owned(), Value::String(v.clone()))).collect();
    let input = json!({ "secret": secret, "headers": headers, "body": body }).to_string();
    let mut child = std::process::Command::new(python())
        .args(["-c", VERIFY])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python with standardwebhooks (pip install standardwebhooks; AGENTPLANE_TOOLS_PYTHON)");
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("python");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn delivered_headers(r: &Received) -> Vec<(&'static str, String)> {
    ["webhook-id", "webhook-timestamp", "webhook-signature"]
        .into_iter()
        .map(|h| (h, r.headers.get(h).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()))
        .collect()
}

async fn create(t: &TestApp, key: &str, body: Value) -> (StatusCode, Value) {
    send(t.client(key, Method::POST, "/webhooks").json(&body)).await.expect("create")
}

#[tokio::test]
async fn endpoints_are_managed_per_project_and_secrets_are_shown_once() {
    let t = app_with(true, Duration::from_secs(2)).await;
    let a = t.tenant().await.expect("tenant");
    let b = t.tenant().await.expect("tenant");
    let (status, created) = create(
        &t,
        &a.key,
        json!({"url": "https://example.com/hook", "eventTypes": ["session.idled"], "description": "ops"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("ep_") && id.len() == 27, "{id}");
    let secret = created["secret"].as_str().expect("secret").to_owned();
    assert!(SigningSecret::parse(&secret).is_ok(), "{secret}");
    assert_eq!(created["object"], "webhook_endpoint");
    assert_eq!(created["eventTypes"], json!(["session.idled"]));
    assert_eq!(created["enabled"], true);
    assert!(created.get("event_types").is_none(), "camelCase only: {created}");

    // The secret is stored sealed, never in plain text, and never shown again.
    let project: ProjectId = a.project_id.parse().expect("project");
    let stored = t
        .store
        .webhooks()
        .get(&webhook::Owner::Project(project), &id.parse().expect("ep"))
        .await
        .expect("stored");
    let raw = format!("{stored:?}");
    assert!(!raw.contains(&secret) && !raw.contains(secret.trim_start_matches("whsec_")), "{raw}");
    let (status, got) = send(t.client(&a.key, Method::GET, &format!("/webhooks/{id}"))).await.expect("get");
    assert_eq!(status, StatusCode::OK);
    assert!(got.get("secret").is_none(), "{got}");
    assert_eq!(got["description"], "ops");
    let (_, list) = send(t.client(&a.key, Method::GET, "/webhooks")).await.expect("list");
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1));
    assert!(list["data"][0].get("secret").is_none());

    // Patch: only what is given changes; bad input names the field; nothing changes then.
    let path = format!("/webhooks/{id}");
    let (status, patched) =
        send(t.client(&a.key, Method::PATCH, &path).json(&json!({"eventTypes": [], "enabled": false})))
            .await
            .expect("patch");
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!((patched["eventTypes"].clone(), patched["enabled"].clone()), (json!([]), json!(false)));
    assert_eq!(patched["url"], "https://example.com/hook");
    for (body, param) in [
        (json!({"eventTypes": ["session.idled", "nope"]}), "eventTypes[1]"),
        (json!({"url": "ftp://example.com/"}), "url"),
        (json!({"url": "https://user:pw@example.com/"}), "url"),
        (json!({"description": "x".repeat(1025)}), "description"),
        (json!({"enabled": "yes"}), "enabled"),
    ] {
        let (status, err) = send(t.client(&a.key, Method::PATCH, &path).json(&body)).await.expect("patch");
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {err}");
        assert_eq!(err["error"]["param"], param, "{err}");
    }
    let (status, err) = create(&t, &a.key, json!({"eventTypes": []})).await;
    assert_eq!((status, err["error"]["param"].clone()), (StatusCode::BAD_REQUEST, json!("url")), "{err}");
    let (status, err) = create(&t, &a.key, json!({"url": "https://example.com/", "secret": "whsec_x"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    let (status, err) = send(
        t.client(&a.key, Method::POST, &format!("{path}/rotate_secret")).json(&json!({"overlapHours": 169})),
    )
    .await
    .expect("rotate");
    assert_eq!((status, err["error"]["param"].clone()), (StatusCode::BAD_REQUEST, json!("overlapHours")));
    let (_, unchanged) = send(t.client(&a.key, Method::GET, &path)).await.expect("get");
    assert_eq!(unchanged, patched);

    // Another project sees nothing and changes nothing.
    for (method, suffix) in [
        (Method::GET, ""),
        (Method::PATCH, ""),
        (Method::DELETE, ""),
        (Method::POST, "/rotate_secret"),
        (Method::POST, "/test"),
        (Method::GET, "/messages"),
    ] {
        let request = t.client(&b.key, method.clone(), &format!("{path}{suffix}"));
        let request = if method == Method::GET || method == Method::DELETE {
            request
        } else {
            request.json(&json!({}))
        };
        let (status, err) = send(request).await.expect("other");
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {suffix}: {err}");
        assert_eq!(err["error"]["code"], "webhook_not_found");
    }
    let (_, theirs) = send(t.client(&b.key, Method::GET, "/webhooks")).await.expect("list");
    assert_eq!(theirs["data"], json!([]));
    let (status, _) = send(t.client(&a.key, Method::GET, "/webhooks/ep_nothex")).await.expect("get");
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Delete, then it is gone and uncounted.
    let (status, deleted) = send(t.client(&a.key, Method::DELETE, &path)).await.expect("delete");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(deleted, json!({"id": id, "object": "webhook_endpoint.deleted", "deleted": true}));
    let (status, _) = send(t.client(&a.key, Method::GET, &path)).await.expect("get");
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send(t.client(&a.key, Method::DELETE, &path)).await.expect("delete again");
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(t.store.webhooks().count(&project).await.expect("count"), 0);
}

#[tokio::test]
async fn a_project_never_has_more_than_fifty_endpoints_even_under_concurrent_creates() {
    let t = app_with(true, Duration::from_secs(2)).await;
    let a = t.tenant().await.expect("tenant");
    let creates = (0..60).map(|i| {
        let t = &t;
        let key = a.key.clone();
        async move { create(t, &key, json!({"url": format!("https://example.com/{i}")})).await }
    });
    let results = futures_util::future::join_all(creates).await;
    let created = results.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
    let refused: Vec<&Value> =
        results.iter().filter(|(s, _)| *s == StatusCode::CONFLICT).map(|(_, b)| b).collect();
    assert_eq!(created, 50, "{results:?}");
    assert_eq!(refused.len(), 10);
    assert!(refused.iter().all(|b| b["error"]["code"] == "webhook_limit_reached"), "{refused:?}");
    let project: ProjectId = a.project_id.parse().expect("project");
    assert_eq!(t.store.webhooks().count(&project).await.expect("count"), 50);
    let (_, list) = send(t.client(&a.key, Method::GET, "/webhooks?limit=100")).await.expect("list");
    assert_eq!(list["data"].as_array().map(Vec::len), Some(50));

    // The 51st is refused; after a delete there is room for one.
    let (status, _) = create(&t, &a.key, json!({"url": "https://example.com/51"})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let first = list["data"][0]["id"].as_str().expect("id");
    let (status, _) =
        send(t.client(&a.key, Method::DELETE, &format!("/webhooks/{first}"))).await.expect("delete");
    assert_eq!(status, StatusCode::OK);
    let (status, _) = create(&t, &a.key, json!({"url": "https://example.com/again"})).await;
    assert_eq!(status, StatusCode::CREATED);
    // Another project has its own fifty.
    let b = t.tenant().await.expect("tenant");
    let (status, _) = create(&t, &b.key, json!({"url": "https://example.com/b"})).await;
    assert_eq!(status, StatusCode::CREATED);
}

async fn core_create(t: &TestApp, tenant: &str, body: Value) -> (StatusCode, Value) {
    send(t.core(Method::POST, &format!("/core/v1/tenants/{tenant}/webhooks")).json(&body))
        .await
        .expect("create")
}

async fn new_tenant(t: &TestApp) -> String {
    let (status, body) =
        send(t.core(Method::POST, "/core/v1/tenants").json(&json!({"name": "hooks"}))).await.expect("tenant");
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["id"].as_str().expect("id").to_owned()
}

async fn attach(t: &TestApp, tenant: &str, project: &str) -> (StatusCode, Value) {
    send(t.core(Method::PUT, &format!("/core/v1/tenants/{tenant}/projects/{project}"))).await.expect("attach")
}

async fn tenant_counts(t: &TestApp, tenant: &str) -> (u64, u64) {
    let (_, body) = send(t.core(Method::GET, &format!("/core/v1/tenants/{tenant}"))).await.expect("get");
    let n = |f: &str| body[f].as_u64().expect("count");
    (n("webhook_endpoint_count"), n("tenant_webhook_endpoint_count"))
}

#[tokio::test]
async fn tenant_wide_endpoints_are_managed_under_core_and_are_invisible_to_projects() {
    let t = app_with(true, Duration::from_secs(2)).await;
    let tenant = new_tenant(&t).await;
    let other = new_tenant(&t).await;
    let a = t.tenant().await.expect("project");
    assert_eq!(attach(&t, &tenant, &a.project_id).await.0, StatusCode::OK);
    let (status, created) =
        core_create(&t, &tenant, json!({"url": "https://example.com/t", "eventTypes": ["session.idled"]}))
            .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert!(created["secret"].as_str().is_some_and(|s| s.starts_with("whsec_")), "{created}");
    let id = created["id"].as_str().expect("id");
    let base = format!("/core/v1/tenants/{tenant}/webhooks");

    let (status, got) = send(t.core(Method::GET, &format!("{base}/{id}"))).await.expect("get");
    assert_eq!(status, StatusCode::OK, "{got}");
    assert!(got.get("secret").is_none(), "{got}");
    let (status, list) = send(t.core(Method::GET, &base)).await.expect("list");
    assert_eq!((status, list["data"].as_array().map(Vec::len)), (StatusCode::OK, Some(1)), "{list}");
    let (status, patched) =
        send(t.core(Method::PATCH, &format!("{base}/{id}")).json(&json!({"description": "ops"})))
            .await
            .expect("patch");
    assert_eq!((status, patched["description"].clone()), (StatusCode::OK, json!("ops")), "{patched}");
    let (status, rotated) =
        send(t.core(Method::POST, &format!("{base}/{id}/rotate_secret")).json(&json!({})))
            .await
            .expect("rotate");
    assert_eq!(status, StatusCode::OK, "{rotated}");
    assert_ne!(rotated["secret"], created["secret"]);
    let (status, messages) = send(t.core(Method::GET, &format!("{base}/{id}/messages"))).await.expect("msgs");
    assert_eq!((status, messages["data"].as_array().map(Vec::len)), (StatusCode::OK, Some(0)), "{messages}");
    assert_eq!(tenant_counts(&t, &tenant).await, (1, 1));

    // Another tenant, the project's key, no Core key, a tenant that does not exist: never found.
    let (status, body) =
        send(t.core(Method::GET, &format!("/core/v1/tenants/{other}/webhooks/{id}"))).await.expect("x");
    assert_eq!((status, body["error"]["code"].clone()), (StatusCode::NOT_FOUND, json!("webhook_not_found")));
    let (status, body) = send(t.client(&a.key, Method::GET, &format!("/webhooks/{id}"))).await.expect("x");
    assert_eq!((status, body["error"]["code"].clone()), (StatusCode::NOT_FOUND, json!("webhook_not_found")));
    let (status, body) = send(t.client(&a.key, Method::DELETE, &format!("/webhooks/{id}"))).await.expect("x");
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _) = send(t.request(Method::GET, &base)).await.expect("x");
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let nowhere = uuid::Uuid::new_v4();
    let (status, _) = core_create(&t, &nowhere.to_string(), json!({"url": "https://example.com/n"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A project's endpoint is not the tenant's either.
    let (_, own) = create(&t, &a.key, json!({"url": "https://example.com/own"})).await;
    let own = own["id"].as_str().expect("id");
    let (status, _) = send(t.core(Method::GET, &format!("{base}/{own}"))).await.expect("x");
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(tenant_counts(&t, &tenant).await, (2, 1));

    let (status, deleted) = send(t.core(Method::DELETE, &format!("{base}/{id}"))).await.expect("delete");
    assert_eq!((status, deleted["deleted"].clone()), (StatusCode::OK, json!(true)), "{deleted}");
    let (status, _) = send(t.core(Method::DELETE, &format!("{base}/{id}"))).await.expect("again");
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(tenant_counts(&t, &tenant).await, (1, 0));
}

#[tokio::test]
async fn fifty_endpoints_per_tenant_count_its_own_and_every_projects_even_under_concurrent_creates() {
    let t = app_with(true, Duration::from_secs(2)).await;
    let tenant = new_tenant(&t).await;
    let a = t.tenant().await.expect("project");
    let b = t.tenant().await.expect("project");
    for p in [&a.project_id, &b.project_id] {
        assert_eq!(attach(&t, &tenant, p).await.0, StatusCode::OK);
    }
    for i in 0..20 {
        assert_eq!(
            create(&t, &a.key, json!({"url": format!("https://example.com/a{i}")})).await.0,
            StatusCode::CREATED
        );
        assert_eq!(
            create(&t, &b.key, json!({"url": format!("https://example.com/b{i}")})).await.0,
            StatusCode::CREATED
        );
    }
    for i in 0..5 {
        let (status, body) =
            core_create(&t, &tenant, json!({"url": format!("https://example.com/t{i}")})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    assert_eq!(tenant_counts(&t, &tenant).await, (45, 5));
    // 45 of 50: twelve at once from both projects and the tenant itself, exactly five get in.
    let creates = (0..12).map(|i| {
        let t = &t;
        let (a, b, tenant) = (a.key.clone(), b.key.clone(), tenant.clone());
        async move {
            let body = json!({"url": format!("https://example.com/c{i}")});
            match i % 3 {
                0 => create(t, &a, body).await,
                1 => create(t, &b, body).await,
                _ => core_create(t, &tenant, body).await,
            }
        }
    });
    let results = futures_util::future::join_all(creates).await;
    let created = results.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
    assert_eq!(created, 5, "{results:?}");
    assert!(
        results
            .iter()
            .filter(|(s, _)| *s != StatusCode::CREATED)
            .all(|(s, b)| *s == StatusCode::CONFLICT && b["error"]["code"] == "webhook_limit_reached"),
        "{results:?}"
    );
    let (own, _) = tenant_counts(&t, &tenant).await;
    assert_eq!(own, 50);
    let pa: ProjectId = a.project_id.parse().expect("p");
    let pb: ProjectId = b.project_id.parse().expect("p");
    let listed = t.store.webhooks().all(&webhook::Owner::Project(pa)).await.expect("a").len()
        + t.store.webhooks().all(&webhook::Owner::Project(pb)).await.expect("b").len();
    let (_, list) =
        send(t.core(Method::GET, &format!("/core/v1/tenants/{tenant}/webhooks?limit=100"))).await.expect("l");
    assert_eq!(listed + list["data"].as_array().map_or(0, Vec::len), 50);

    // A lone project with three endpoints does not fit; it stays alone and keeps them.
    let lone = t.tenant().await.expect("project");
    for i in 0..3 {
        assert_eq!(
            create(&t, &lone.key, json!({"url": format!("https://example.com/l{i}")})).await.0,
            StatusCode::CREATED
        );
    }
    let (status, body) = attach(&t, &tenant, &lone.project_id).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::CONFLICT, json!("webhook_limit_reached")),
        "{body}"
    );
    let lone_id: ProjectId = lone.project_id.parse().expect("p");
    assert_eq!(t.store.projects().get(&lone_id).await.expect("project").tenant_id, None);
    // Room for three: the tenant deletes three of its own; then the project moves in with its
    // three, and the tenant is full again.
    for e in list["data"].as_array().expect("list").iter().take(3) {
        let id = e["id"].as_str().expect("id");
        let (status, _) = send(t.core(Method::DELETE, &format!("/core/v1/tenants/{tenant}/webhooks/{id}")))
            .await
            .expect("d");
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(attach(&t, &tenant, &lone.project_id).await.0, StatusCode::OK);
    assert_eq!(tenant_counts(&t, &tenant).await.0, 50);
    let (status, _) = create(&t, &lone.key, json!({"url": "https://example.com/l-more"})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    // A delete of the moved project's endpoint gives the tenant its place back.
    let (_, own) = send(t.client(&lone.key, Method::GET, "/webhooks")).await.expect("list");
    let first = own["data"][0]["id"].as_str().expect("id");
    assert_eq!(
        send(t.client(&lone.key, Method::DELETE, &format!("/webhooks/{first}"))).await.expect("d").0,
        StatusCode::OK
    );
    assert_eq!(tenant_counts(&t, &tenant).await.0, 49);
    let (status, _) = core_create(&t, &tenant, json!({"url": "https://example.com/last"})).await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test]
async fn deliveries_are_signed_as_the_reference_library_verifies_and_rotation_overlaps() {
    let t = app_with(true, Duration::from_secs(5)).await;
    let a = t.tenant().await.expect("tenant");
    let receiver = Receiver::start().await;
    let (status, created) = create(&t, &a.key, json!({"url": receiver.url})).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().expect("id").to_owned();
    let old_secret = created["secret"].as_str().expect("secret").to_owned();

    let (status, attempt) =
        send(t.client(&a.key, Method::POST, &format!("/webhooks/{id}/test"))).await.expect("test");
    assert_eq!(status, StatusCode::OK, "{attempt}");
    assert_eq!(attempt["statusCode"], 200);
    assert_eq!(attempt["number"], 1);
    assert_eq!(attempt["responseExcerpt"], "thanks");
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    let first = &got[0];
    let headers = delivered_headers(first);
    assert!(headers[0].1.starts_with("evt_"), "{headers:?}");
    assert_eq!(first.headers.get("content-type").and_then(|v| v.to_str().ok()), Some("application/json"));
    let payload: Value = serde_json::from_str(&first.body).expect("json body");
    assert_eq!(payload["type"], "webhook.test");
    assert_eq!(payload["data"]["endpointId"], id.as_str());
    assert!(payload["timestamp"].is_string());

    assert_eq!(verify(&old_secret, &headers, &first.body), "ok");
    let wrong = SigningSecret::from_random([9; 32]).expose();
    assert!(verify(&wrong, &headers, &first.body).starts_with("fail"), "a wrong secret must not verify");
    let mut tampered = first.body.clone();
    tampered.push(' ');
    assert!(verify(&old_secret, &headers, &tampered).starts_with("fail"));
    // A correctly signed but stale message (10 minutes old) is refused by the library.
    let stale_ts = headers[1].1.parse::<i64>().expect("ts") - 600;
    let secret = SigningSecret::parse(&old_secret).expect("secret");
    let stale = sign(&headers[0].1, stale_ts, first.body.as_bytes(), &[secret]);
    let stale_headers: Vec<(&str, String)> =
        stale.pairs().iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
    let verdict = verify(&old_secret, &stale_headers, &first.body);
    assert!(verdict.starts_with("fail") && verdict.contains("old"), "{verdict}");

    // Rotation: during the overlap both secrets verify the same delivery.
    let (status, rotated) =
        send(t.client(&a.key, Method::POST, &format!("/webhooks/{id}/rotate_secret"))).await.expect("rotate");
    assert_eq!(status, StatusCode::OK, "{rotated}");
    let new_secret = rotated["secret"].as_str().expect("secret").to_owned();
    assert_ne!(new_secret, old_secret);
    send(t.client(&a.key, Method::POST, &format!("/webhooks/{id}/test"))).await.expect("test");
    let second = receiver.received().pop().expect("second delivery");
    let headers = delivered_headers(&second);
    assert_eq!(headers[2].1.split(' ').count(), 2, "{headers:?}");
    assert_eq!(verify(&old_secret, &headers, &second.body), "ok");
    assert_eq!(verify(&new_secret, &headers, &second.body), "ok");

    // A rotation without overlap: only the newest secret signs.
    let (status, rotated) = send(
        t.client(&a.key, Method::POST, &format!("/webhooks/{id}/rotate_secret"))
            .json(&json!({"overlapHours": 0})),
    )
    .await
    .expect("rotate");
    assert_eq!(status, StatusCode::OK, "{rotated}");
    let newest = rotated["secret"].as_str().expect("secret").to_owned();
    send(t.client(&a.key, Method::POST, &format!("/webhooks/{id}/test"))).await.expect("test");
    let third = receiver.received().pop().expect("third delivery");
    let headers = delivered_headers(&third);
    assert_eq!(headers[2].1.split(' ').count(), 1, "{headers:?}");
    assert_eq!(verify(&newest, &headers, &third.body), "ok");
    assert!(verify(&new_secret, &headers, &third.body).starts_with("fail"));
    assert!(verify(&old_secret, &headers, &third.body).starts_with("fail"));

    // The messages, newest first, each with its attempt.
    let (status, messages) =
        send(t.client(&a.key, Method::GET, &format!("/webhooks/{id}/messages"))).await.expect("messages");
    assert_eq!(status, StatusCode::OK, "{messages}");
    let data = messages["data"].as_array().expect("data");
    assert_eq!(data.len(), 3);
    assert_eq!(data[0]["id"].as_str(), Some(headers[0].1.as_str()));
    for m in data {
        assert_eq!(m["status"], "succeeded");
        assert_eq!(m["eventType"], "webhook.test");
        assert_eq!(m["attempts"].as_array().map(Vec::len), Some(1), "{m}");
        assert_eq!(m["attempts"][0]["statusCode"], 200);
    }

    // Redelivery sends the same message (same id, same body) again, signed afresh.
    let oldest = data[2]["id"].as_str().expect("id").to_owned();
    let redeliver = format!("/webhooks/{id}/messages/{oldest}/redeliver");
    let (status, attempt) = send(t.client(&a.key, Method::POST, &redeliver)).await.expect("redeliver");
    assert_eq!(status, StatusCode::OK, "{attempt}");
    assert_eq!((attempt["number"].clone(), attempt["statusCode"].clone()), (json!(2), json!(200)));
    let again = receiver.received().pop().expect("redelivery");
    let headers = delivered_headers(&again);
    assert_eq!(headers[0].1, oldest);
    assert_eq!(again.body, receiver.received()[0].body);
    assert_eq!(verify(&newest, &headers, &again.body), "ok");
    let (_, messages) =
        send(t.client(&a.key, Method::GET, &format!("/webhooks/{id}/messages"))).await.expect("messages");
    let redelivered = messages["data"].as_array().expect("data").iter().find(|m| m["id"] == oldest.as_str());
    assert_eq!(redelivered.map(|m| m["attempts"].as_array().map(Vec::len)), Some(Some(2)));

    // Another project's key, an unknown message, or a message of another endpoint: 404.
    let b = t.tenant().await.expect("tenant");
    let (status, err) = send(t.client(&b.key, Method::POST, &redeliver)).await.expect("redeliver");
    assert_eq!((status, err["error"]["code"].clone()), (StatusCode::NOT_FOUND, json!("webhook_not_found")));
    let (_, other) = create(&t, &a.key, json!({"url": receiver.url})).await;
    let other = other["id"].as_str().expect("id");
    for path in [
        format!("/webhooks/{id}/messages/evt_000000000000000000000000/redeliver"),
        format!("/webhooks/{id}/messages/nope/redeliver"),
        format!("/webhooks/{other}/messages/{oldest}/redeliver"),
    ] {
        let (status, err) = send(t.client(&a.key, Method::POST, &path)).await.expect("redeliver");
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {err}");
        assert_eq!(err["error"]["code"], "webhook_message_not_found", "{path}");
    }
    assert_eq!(receiver.received().len(), 4, "nothing else was sent");
}

#[tokio::test]
async fn private_addresses_are_refused_at_create_and_at_delivery_unless_allowed() {
    let t = app_with(false, Duration::from_secs(2)).await;
    let a = t.tenant().await.expect("tenant");
    for url in [
        "http://127.0.0.1:9/hook",
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:9/hook",
        "http://localhost:9/hook",
        "http://[::ffff:127.0.0.1]/",
    ] {
        let (status, err) = create(&t, &a.key, json!({ "url": url })).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {err}");
        assert_eq!(err["error"]["code"], "url_not_allowed", "{url}: {err}");
        assert_eq!(err["error"]["param"], "url");
    }
    let project: ProjectId = a.project_id.parse().expect("project");
    assert_eq!(t.store.webhooks().count(&project).await.expect("count"), 0);
    let (_, list) = send(t.client(&a.key, Method::GET, "/webhooks")).await.expect("list");
    assert_eq!(list["data"], json!([]));

    // A public endpoint cannot be pointed at a private one either.
    let (_, created) = create(&t, &a.key, json!({"url": "https://93.184.216.34/hook"})).await;
    let id = created["id"].as_str().expect("id").to_owned();
    let (status, err) = send(
        t.client(&a.key, Method::PATCH, &format!("/webhooks/{id}"))
            .json(&json!({"url": "http://127.0.0.1:9/"})),
    )
    .await
    .expect("patch");
    assert_eq!((status, err["error"]["code"].clone()), (StatusCode::BAD_REQUEST, json!("url_not_allowed")));

    // An endpoint that reached storage pointing at loopback (as a DNS answer that changed after
    // create would) is checked again at delivery: nothing is sent, the attempt says why.
    let receiver = Receiver::start().await;
    let key = t.app.webhooks.key.clone().expect("key");
    let ep_id = EndpointId::from_random([0x5a; 12]);
    let sealed =
        key.seal(ep_id.as_str(), SigningSecret::from_random([1; 32]).expose().as_bytes()).expect("seal");
    let now = agentplane_api::edge::now();
    let endpoint = webhook::new_endpoint(
        EndpointFields { url: Some(receiver.url.clone()), ..Default::default() },
        ep_id.clone(),
        webhook::Owner::Project(project),
        StoredSecret { sealed, created_at: now, expires_at: None },
        now,
    )
    .expect("endpoint");
    t.store.webhooks().create(&endpoint).await.expect("stored");
    let (status, attempt) =
        send(t.client(&a.key, Method::POST, &format!("/webhooks/{ep_id}/test"))).await.expect("test");
    assert_eq!(status, StatusCode::OK, "{attempt}");
    assert_eq!(attempt["statusCode"], Value::Null);
    assert!(attempt["error"].as_str().is_some_and(|e| e.contains("loopback")), "{attempt}");
    assert!(receiver.received().is_empty(), "a refused delivery must not connect");
}

#[tokio::test]
async fn a_gone_receiver_disables_its_endpoint() {
    let t = app_with(true, Duration::from_secs(5)).await;
    let a = t.tenant().await.expect("tenant");
    let receiver = Receiver::start().await;
    receiver.answer(410);
    let (_, created) = create(&t, &a.key, json!({"url": receiver.url})).await;
    let id = created["id"].as_str().expect("id").to_owned();
    let (status, attempt) =
        send(t.client(&a.key, Method::POST, &format!("/webhooks/{id}/test"))).await.expect("test");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(attempt["statusCode"], 410);
    let (_, endpoint) = send(t.client(&a.key, Method::GET, &format!("/webhooks/{id}"))).await.expect("get");
    assert_eq!(endpoint["enabled"], false, "{endpoint}");
    assert!(endpoint["disabledReason"].as_str().is_some_and(|r| r.contains("410")), "{endpoint}");
    let (_, messages) =
        send(t.client(&a.key, Method::GET, &format!("/webhooks/{id}/messages"))).await.expect("messages");
    assert_eq!(messages["data"][0]["status"], "failed");
    assert_eq!(messages["data"][0]["nextAttemptAt"], Value::Null);

    // A 500 is retried on the schedule: the message stays pending, due 5 s after the attempt.
    receiver.answer(500);
    let (_, attempt) =
        send(t.client(&a.key, Method::POST, &format!("/webhooks/{id}/test"))).await.expect("test");
    assert_eq!(attempt["statusCode"], 500);
    let (_, messages) =
        send(t.client(&a.key, Method::GET, &format!("/webhooks/{id}/messages"))).await.expect("messages");
    let newest = &messages["data"][0];
    assert_eq!(newest["status"], "pending");
    assert_eq!(newest["nextAttemptAt"].as_i64(), newest["attempts"][0]["at"].as_i64().map(|at| at + 5));
    // Turning it back on clears the reason.
    let (_, endpoint) =
        send(t.client(&a.key, Method::PATCH, &format!("/webhooks/{id}")).json(&json!({"enabled": true})))
            .await
            .expect("patch");
    assert_eq!((endpoint["enabled"].clone(), endpoint["disabledReason"].clone()), (json!(true), Value::Null));
}

#[tokio::test]
async fn a_receiver_that_hangs_is_recorded_as_a_timeout_at_the_deployments_ten_seconds() {
    // The deployment's own ceiling, not a shortened one.
    let t = app_with(true, agentplane_engine::webhooks::DEFAULT_TIMEOUT).await;
    let a = t.tenant().await.expect("tenant");
    let receiver = Receiver::start().await;
    receiver.hang(Duration::from_secs(30));
    let (_, created) = create(&t, &a.key, json!({"url": receiver.url})).await;
    let id = created["id"].as_str().expect("id").to_owned();
    let (status, attempt) =
        send(t.client(&a.key, Method::POST, &format!("/webhooks/{id}/test"))).await.expect("test");
    assert_eq!(status, StatusCode::OK, "{attempt}");
    assert_eq!(attempt["statusCode"], Value::Null);
    assert!(attempt["error"].as_str().is_some_and(|e| e.contains("timed out")), "{attempt}");
    // The rule, not the wall clock: it waited the ten seconds (a timer never fires early) and
    // gave up long before the receiver's 30 s hang would have answered (a busy machine only
    // makes the wait a little longer, never twenty seconds longer).
    let ms = attempt["durationMs"].as_u64().expect("duration");
    assert!((9_900..30_000).contains(&ms), "{ms}");
    let (_, messages) =
        send(t.client(&a.key, Method::GET, &format!("/webhooks/{id}/messages"))).await.expect("messages");
    assert_eq!(messages["data"][0]["status"], "pending");
    assert_eq!(messages["data"][0]["attempts"][0]["error"], attempt["error"]);
}

#[tokio::test]
async fn without_a_secret_key_endpoints_cannot_be_created() {
    let t = TestApp::spawn_with(|app: App| {
        app.with_webhooks(WebhookConfig {
            timeout: Duration::from_secs(1),
            ..WebhookConfig::new(None, agentplane_tests::loopback_receivers())
        })
    })
    .await
    .expect("app");
    let a = t.tenant().await.expect("tenant");
    let (status, err) = create(&t, &a.key, json!({"url": "https://example.com/hook"})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{err}");
    assert_eq!(err["error"]["code"], "webhooks_unavailable");
    let project: ProjectId = a.project_id.parse().expect("project");
    assert_eq!(t.store.webhooks().count(&project).await.expect("count"), 0);
}
