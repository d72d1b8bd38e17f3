//! The lifecycle routes the E2B SDKs call (`/v2/sandboxes`, `…/connect`): their rules as a
//! client sees them — E2B's fields, one envd access token per sandbox that stays the same on
//! connect, E2B-format 400s for bad input, another project's sandbox a 404, lists that page
//! with `x-next-token`, filter by state and metadata and never show ended sandboxes or an
//! environment's workspace.
// Test harness: a failed expectation should fail the test right there.
#![allow(clippy::expect_used)]

use std::collections::BTreeSet;

use agentplane_tests::sandbox::{Env, env};
use agentplane_tests::{TestApp, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn v2_create(env: &Env, body: Value) -> Value {
    let (status, created) = env.call(Method::POST, "/v2/sandboxes", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    created
}

/// Every page of `GET /v2/sandboxes?{query}` (`limit` per page): the ids, in order, and how many
/// pages it took.
async fn list_all(app: &TestApp, key: &str, query: &str) -> (Vec<String>, usize) {
    let mut ids = Vec::new();
    let mut token: Option<String> = None;
    for pages in 1..50 {
        let mut path = format!("/v2/sandboxes?{query}");
        if let Some(t) = &token {
            path.push_str(&format!("&nextToken={t}"));
        }
        let response = app.sandbox(key, Method::GET, &path).send().await.expect("list");
        assert_eq!(response.status(), StatusCode::OK);
        token = response.headers().get("x-next-token").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let body: Value = response.json().await.expect("json");
        for item in body.as_array().expect("an array") {
            ids.push(item["sandboxID"].as_str().expect("sandboxID").to_owned());
        }
        if token.is_none() {
            return (ids, pages);
        }
    }
    panic!("the list never ended");
}

#[track_caller]
fn e2b_400(answer: &(StatusCode, Value), names: &str) {
    assert_eq!(answer.0, StatusCode::BAD_REQUEST, "{}", answer.1);
    assert_eq!(answer.1["code"], 400, "{}", answer.1);
    let message = answer.1["message"].as_str().expect("a message");
    assert!(message.contains(names), "{message} does not name {names}");
}

#[tokio::test]
async fn create_read_and_connect_show_one_envd_token_and_e2b_fields() {
    let env = env().await;
    let created =
        v2_create(&env, json!({"templateID": "base", "metadata": {"app": "a"}, "envVars": {}})).await;
    let id = created["sandboxID"].as_str().expect("sandboxID").to_owned();
    assert_eq!(created["templateID"], "base");
    assert_eq!(created["envdVersion"], "0.5.7");
    assert!(created["clientID"].is_string(), "{created}");
    assert!(created["domain"].is_null(), "{created}");
    let token = created["envdAccessToken"].as_str().expect("a token").to_owned();
    assert!(token.len() >= 43 && token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));

    // Kept sealed: the record does not hold the token's text.
    let stored = env.app.store.sandboxes().get_any(&id.parse().expect("id")).await.expect("stored");
    let sealed = stored.envd_token_sealed.expect("sealed");
    assert!(!sealed.contains(&token));

    let (status, detail) = env.call(Method::GET, &format!("/sandboxes/{id}"), None).await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    for field in
        ["templateID", "clientID", "envdVersion", "startedAt", "endAt", "cpuCount", "memoryMB", "diskSizeMB"]
    {
        assert!(!detail[field].is_null(), "{field}: {detail}");
    }
    assert_eq!((&detail["state"], &detail["metadata"]["app"]), (&json!("running"), &json!("a")));
    assert_eq!(detail["envdAccessToken"], token.as_str());

    // Connect to a running sandbox: 200, the same token; a longer timeout moves the deadline.
    let (status, connected) =
        env.call(Method::POST, &format!("/v2/sandboxes/{id}/connect"), Some(json!({"timeout": 1800}))).await;
    assert_eq!(status, StatusCode::OK, "{connected}");
    assert_eq!(
        (connected["sandboxID"].as_str(), connected["envdAccessToken"].as_str()),
        (Some(&*id), Some(&*token))
    );
    let (_, after) = env.call(Method::GET, &format!("/sandboxes/{id}"), None).await;
    assert!(after["endAt"].as_str() > detail["endAt"].as_str(), "{after}");
    // A shorter one never shortens it.
    let (status, _) =
        env.call(Method::POST, &format!("/sandboxes/{id}/connect"), Some(json!({"timeout": 10}))).await;
    assert_eq!(status, StatusCode::OK);
    let (_, same) = env.call(Method::GET, &format!("/sandboxes/{id}"), None).await;
    assert_eq!(same["endAt"], after["endAt"]);

    // Connect resumes a paused sandbox: 201, running, the same token.
    let (status, body) = env
        .call(Method::POST, &format!("/sandboxes/{id}/pause"), Some(json!({"requireHealthyGuest": false})))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, resumed) =
        env.call(Method::POST, &format!("/v2/sandboxes/{id}/connect"), Some(json!({}))).await;
    assert_eq!(status, StatusCode::CREATED, "{resumed}");
    assert_eq!(resumed["envdAccessToken"], token.as_str());
    let (_, running) = env.call(Method::GET, &format!("/sandboxes/{id}"), None).await;
    assert_eq!(running["state"], "running");

    // A killed sandbox is gone for connect.
    let (status, _) = env.call(Method::DELETE, &format!("/sandboxes/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, gone) =
        env.call(Method::POST, &format!("/v2/sandboxes/{id}/connect"), Some(json!({}))).await;
    assert_eq!((status, &gone["code"]), (StatusCode::NOT_FOUND, &json!(404)), "{gone}");
}

#[tokio::test]
async fn bad_input_is_an_e2b_400_and_creates_nothing() {
    let env = env().await;
    let bodies = [
        (json!({"templateID": "code-interpreter-v1"}), "templateID"),
        (json!({"timeout": 0}), "timeout"),
        (json!({"timeout": "60"}), "timeout"),
        (json!({"autoPause": true}), "autoPause"),
        (json!({"metadata": "x"}), "metadata"),
        (json!({"metadata": {"agentplane.environment_id": "e"}}), "agentplane."),
        (json!({"envVars": {"1X": "y"}}), "environment variable names"),
        (json!({"network": {"allowOut": ["x"]}}), "network"),
    ];
    for (body, names) in bodies {
        e2b_400(&env.call(Method::POST, "/v2/sandboxes", Some(body)).await, names);
    }
    let (_, listed) = env.call(Method::GET, "/v2/sandboxes", None).await;
    assert_eq!(listed, json!([]), "a refused create made a sandbox");
    let queries = [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=x", "limit"),
        ("state=killed", "state"),
        ("state=running&state=paused", "state"),
        ("metadata=novalue", "metadata"),
        ("nextToken=bm90IGEgdG9rZW4", "nextToken"),
        ("order=asc", "order"),
    ];
    for (query, names) in queries {
        e2b_400(&env.call(Method::GET, &format!("/v2/sandboxes?{query}"), None).await, names);
    }
    let id = v2_create(&env, json!({})).await["sandboxID"].as_str().expect("id").to_owned();
    for body in
        [json!({"timeout": 0}), json!({"timeout": 3601}), json!({"timeout": 1.5}), json!({"memory": false})]
    {
        let path = format!("/v2/sandboxes/{id}/connect");
        let answer = env.call(Method::POST, &path, Some(body.clone())).await;
        assert_eq!(
            (answer.0, &answer.1["code"]),
            (StatusCode::BAD_REQUEST, &json!(400)),
            "{body}: {}",
            answer.1
        );
    }
    // The timeout route keeps the spec's three values.
    e2b_400(
        &env.call(Method::POST, &format!("/sandboxes/{id}/timeout"), Some(json!({"timeout": 60}))).await,
        "900",
    );
}

#[tokio::test]
async fn another_projects_sandbox_is_a_404_and_its_token_pages_nothing() {
    let env = env().await;
    let id = v2_create(&env, json!({})).await["sandboxID"].as_str().expect("id").to_owned();
    let other = env.app.tenant().await.expect("another tenant");
    let attempts = [
        (Method::GET, format!("/sandboxes/{id}"), None),
        (Method::POST, format!("/v2/sandboxes/{id}/connect"), Some(json!({}))),
        (Method::POST, format!("/sandboxes/{id}/connect"), Some(json!({"timeout": 900}))),
        (Method::POST, format!("/sandboxes/{id}/pause"), None),
        (Method::DELETE, format!("/sandboxes/{id}"), None),
    ];
    for (method, path, body) in attempts {
        let mut request = env.app.sandbox(&other.key, method.clone(), &path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let (status, answer) = send(request).await.expect("request");
        assert_eq!(
            (status, &answer["code"]),
            (StatusCode::NOT_FOUND, &json!(404)),
            "{method} {path}: {answer}"
        );
        assert!(answer.get("envdAccessToken").is_none());
    }
    let (ids, _) = list_all(&env.app, &other.key, "limit=10").await;
    assert!(ids.is_empty(), "{ids:?}");
    // A token naming the first project's sandbox is no token of the second's.
    let token = agentplane_domain::sandbox::listing::next_token(&id.parse().expect("id"));
    let (status, body) =
        send(env.app.sandbox(&other.key, Method::GET, &format!("/v2/sandboxes?nextToken={token}")))
            .await
            .expect("list");
    assert_eq!((status, &body["code"]), (StatusCode::BAD_REQUEST, &json!(400)), "{body}");
    // Untouched for its owner.
    let (_, detail) = env.call(Method::GET, &format!("/sandboxes/{id}"), None).await;
    assert_eq!(detail["state"], "running");
}

#[tokio::test]
async fn lists_page_filter_and_never_show_ended_sandboxes() {
    let env = env().await;
    let mut live = BTreeSet::new();
    for n in 0..4 {
        let team = if n % 2 == 0 { "red" } else { "blue team&co" };
        let created = v2_create(&env, json!({"metadata": {"team": team, "n": n.to_string()}})).await;
        live.insert(created["sandboxID"].as_str().expect("id").to_owned());
    }
    let killed = v2_create(&env, json!({"metadata": {"team": "red"}})).await["sandboxID"]
        .as_str()
        .expect("id")
        .to_owned();
    let (status, _) = env.call(Method::DELETE, &format!("/sandboxes/{killed}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let expired = v2_create(&env, json!({"timeout": 1, "metadata": {"team": "red"}})).await["sandboxID"]
        .as_str()
        .expect("id")
        .to_owned();
    let paused = live.iter().next().cloned().expect("one");
    let (status, _) = env.call(Method::POST, &format!("/sandboxes/{paused}/pause"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;

    // Pages of two: every live sandbox once, newest first, none ended.
    let (ids, pages) = list_all(&env.app, &env.tenant.key, "limit=2").await;
    assert_eq!(ids.iter().cloned().collect::<BTreeSet<_>>(), live, "{ids:?}");
    assert_eq!((ids.len(), pages), (4, 2), "{ids:?}");
    assert!(!ids.contains(&killed) && !ids.contains(&expired));
    let (one_page, pages) = list_all(&env.app, &env.tenant.key, "limit=100").await;
    assert_eq!((one_page, pages), (ids.clone(), 1));

    // By state.
    let (only_paused, _) = list_all(&env.app, &env.tenant.key, "state=paused").await;
    assert_eq!(only_paused, vec![paused.clone()]);
    let (running, _) = list_all(&env.app, &env.tenant.key, "state=running").await;
    assert_eq!(running.len(), 3);
    assert!(!running.contains(&paused));
    let (status, body) = env.call(Method::GET, "/v2/sandboxes?state=running,paused&limit=1", None).await;
    assert_eq!((status, body.as_array().map(Vec::len)), (StatusCode::OK, Some(1)), "{body}");

    // By metadata, as the SDKs encode it: urlencode({quote(k): quote(v)}).
    let (blue, _) = list_all(&env.app, &env.tenant.key, "metadata=team%3Dblue%252520team%252526co").await;
    assert_eq!(blue.len(), 2, "{blue:?}");
    let (red_one, _) = list_all(&env.app, &env.tenant.key, "metadata=team%3Dred%26n%3D2").await;
    assert_eq!(red_one.len(), 1, "{red_one:?}");
    let (none, _) = list_all(&env.app, &env.tenant.key, "metadata=team%3Dgreen").await;
    assert!(none.is_empty());

    // A listed sandbox carries what the SDK parses.
    let (_, body) = env.call(Method::GET, "/v2/sandboxes?limit=1", None).await;
    let item = &body[0];
    for field in [
        "templateID",
        "sandboxID",
        "clientID",
        "startedAt",
        "endAt",
        "cpuCount",
        "memoryMB",
        "diskSizeMB",
        "state",
        "envdVersion",
        "metadata",
    ] {
        assert!(!item[field].is_null(), "{field}: {item}");
    }
    assert!(item.get("envdAccessToken").is_none(), "lists show no token: {item}");
}

#[tokio::test]
async fn an_environments_workspace_is_neither_listed_nor_connectable() {
    let env = env().await;
    let app = &env.app;
    let key = &env.tenant.key;
    let environment = app.made(key, "/environments").await.expect("environment");
    let file = format!("/environments/{environment}/files?path=/workspace/kept.txt");
    let (status, body) = send(app.v1(key, Method::PUT, &file).body("kept")).await.expect("put");
    assert_eq!(status, StatusCode::OK, "{body}");
    let stored = app
        .store
        .environments()
        .get(&env.tenant.project_id.parse().expect("project"), &environment.parse().expect("environment"))
        .await
        .expect("environment");
    let workspace = stored.sandbox_id.map(|s| s.to_string()).expect("a workspace sandbox");

    let (ids, _) = list_all(app, key, "limit=100").await;
    assert!(!ids.contains(&workspace), "{ids:?}");
    for path in [format!("/v2/sandboxes/{workspace}/connect"), format!("/sandboxes/{workspace}/connect")] {
        let (status, answer) = env.call(Method::POST, &path, Some(json!({"timeout": 900}))).await;
        assert_eq!((status, &answer["code"]), (StatusCode::CONFLICT, &json!(409)), "{answer}");
        assert!(answer.get("envdAccessToken").is_none());
    }
    let (status, body) = send(app.v1(key, Method::GET, &file)).await.expect("get");
    assert_eq!(status, StatusCode::OK, "the workspace still serves its files: {body}");
}
