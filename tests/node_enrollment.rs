//! Node enrollment (README "Rotating secrets" › node enrollment): a host nobody gave a token
//! enrolls with the deployment's enrollment key, one node per name; the daemon enrolls once and
//! keeps its token.

use agentplane_api::keys::RotatingKeys;
use agentplane_domain::api_key::CoreKeys;
use agentplane_tests::{TestApp, TestNode, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const KEY: &str = "enroll_key_for_tests_000000000001";

async fn app() -> anyhow::Result<TestApp> {
    let keys = CoreKeys::parse(KEY)?;
    TestApp::spawn_with(|app| app.with_node_enrollment(RotatingKeys::fixed(keys))).await
}

async fn enroll(app: &TestApp, key: Option<&str>, body: Value) -> anyhow::Result<(StatusCode, Value)> {
    let mut request = app.request(Method::POST, "/node/v1/enroll").json(&body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    send(request).await
}

async fn nodes_named(app: &TestApp, name: &str) -> anyhow::Result<usize> {
    Ok(app.store.nodes().all().await?.iter().filter(|n| n.name == name).count())
}

#[tokio::test]
async fn enrolling_needs_the_enrollment_key_and_makes_one_node_per_name() -> anyhow::Result<()> {
    let app = app().await?;
    let name = "i-0123456789abcdef0";
    for key in [None, Some("enroll_key_for_tests_000000000002"), Some(app.core_key.as_str())] {
        let (status, body) = enroll(&app, key, json!({ "name": name })).await?;
        assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_enrollment_key");
    }
    assert_eq!(nodes_named(&app, name).await?, 0, "nothing was made");

    let (status, first) = enroll(&app, Some(KEY), json!({ "name": name })).await?;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(first["object"], "sandbox_node");
    assert_eq!(first["name"], name);
    let t1 = str_field(&first, "token")?;
    let (status, _) = send(app.request(Method::GET, "/node/v1/sandboxes").bearer_auth(&t1)).await?;
    assert_eq!(status, StatusCode::OK);

    // The same name again: the same node, a new token, the earlier one refused.
    let (status, again) = enroll(&app, Some(KEY), json!({ "name": name })).await?;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["id"], first["id"]);
    let t2 = str_field(&again, "token")?;
    let (status, body) = send(app.request(Method::GET, "/node/v1/sandboxes").bearer_auth(&t1)).await?;
    assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_node_token");
    let (status, _) = send(app.request(Method::GET, "/node/v1/sandboxes").bearer_auth(&t2)).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(nodes_named(&app, name).await?, 1);

    let (status, other) = enroll(&app, Some(KEY), json!({ "name": "i-0fedcba9876543210" })).await?;
    assert_eq!(status, StatusCode::CREATED, "{other}");
    assert_ne!(other["id"], first["id"]);

    for bad in [
        json!({}),
        json!({ "name": " " }),
        json!({ "name": "x".repeat(129) }),
        json!({ "name": 7 }),
        json!({ "name": "a", "extra": 1 }),
    ] {
        let (status, body) = enroll(&app, Some(KEY), bad.clone()).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad} → {body}");
    }
    Ok(())
}

#[tokio::test]
async fn without_an_enrollment_key_the_route_answers_404() -> anyhow::Result<()> {
    let app = TestApp::spawn().await?;
    let (status, body) = enroll(&app, Some(KEY), json!({ "name": "i-1" })).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    assert_eq!(nodes_named(&app, "i-1").await?, 0);
    Ok(())
}

#[tokio::test]
async fn the_daemon_enrolls_once_and_restarts_with_its_kept_token() -> anyhow::Result<()> {
    let app = app().await?;
    let mut node = TestNode::enroll(&app, KEY, "i-daemon").await?;
    let kept = node.kept_token()?.ok_or_else(|| anyhow::anyhow!("no kept token"))?;
    let (status, _) = send(app.request(Method::GET, "/node/v1/sandboxes").bearer_auth(&kept)).await?;
    assert_eq!(status, StatusCode::OK);
    node.restart(&app).await?;
    // Not enrolled again (that would have reissued, refusing the kept token).
    assert_eq!(node.kept_token()?, Some(kept.clone()));
    let (status, _) = send(app.request(Method::GET, "/node/v1/sandboxes").bearer_auth(&kept)).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(nodes_named(&app, "i-daemon").await?, 1);
    Ok(())
}
