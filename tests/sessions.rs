//! The client API's sessions routes: validation, auth, keyset lists, and isolation between
//! projects.

use agentplane_domain::{ProjectId, SessionId};
use agentplane_tests::{Tenant, TestApp, assert_error, send, send_with_cache, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn create(app: &TestApp, tenant: &Tenant, body: Value) -> anyhow::Result<Value> {
    let (status, body) = send(app.client(&tenant.key, Method::POST, "/sessions").json(&body)).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "create session: {status} {body}");
    Ok(body)
}

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .map(|d| d.iter().filter_map(|s| s["id"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn creating_a_session_stores_what_later_issues_need() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let agent = app.create_agent(&tenant.key, json!({"name": "support", "model": "m"})).await?;
    let (status, cache, body) = send_with_cache(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({
        "agent_id": agent, "title": "Support chat", "metadata": {"customer": "42"}, "environment_mode": "openai_hosted",
        "some_future_field": true
    })))
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(cache.as_deref(), Some("no-store"));
    assert_eq!(body["object"], "session");
    assert_eq!(body["agent_id"], agent.as_str());
    assert_eq!(body["title"], "Support chat");
    assert_eq!(body["metadata"], json!({"customer": "42"}));
    assert_eq!(body["environment_mode"], "openai_hosted");
    assert_eq!(body["runtime_status"], "idle");
    assert_eq!(body["stop_reason"], Value::Null);
    assert!(body["created_at"].is_i64());

    let project: ProjectId = tenant.project_id.parse()?;
    let id: SessionId = str_field(&body, "id")?.parse()?;
    let stored = app.store.sessions().get(&project, &id).await?;
    assert_eq!(stored.title.as_ref().map(|t| t.as_str()), Some("Support chat"));
    assert_eq!(stored.runtime_status, agentplane_domain::session::RuntimeStatus::Idle);

    // A bare POST makes an empty session in mode none.
    let (status, empty) = send(app.client(&tenant.key, Method::POST, "/sessions")).await?;
    assert_eq!(status, StatusCode::CREATED, "{empty}");
    assert_eq!(empty["environment_mode"], "none");
    assert_eq!(empty["title"], Value::Null);
    assert_eq!(empty["metadata"], json!({}));
    Ok(())
}

#[tokio::test]
async fn bad_session_bodies_are_refused_and_nothing_is_stored() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let cases = [
        (json!({"title": 5}), "title"),
        (json!({"title": "x".repeat(257)}), "title"),
        (json!({"metadata": []}), "metadata"),
        (json!({"metadata": "a"}), "metadata"),
        (json!({"metadata": {"a": 1}}), "metadata.a"),
        (json!({"metadata": {"a": "x".repeat(513)}}), "metadata.a"),
        (json!({"agent_id": "agent-1"}), "agent_id"),
        (json!({"agent_id": 7}), "agent_id"),
        (json!({"environment_mode": "cloud"}), "environment_mode"),
        (json!({"environment_mode": 1}), "environment_mode"),
    ];
    for (body, param) in cases {
        let (status, answer) = send(app.client(&tenant.key, Method::POST, "/sessions").json(&body)).await?;
        assert_error((status, &answer), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(answer["error"]["param"], param, "{body}");
    }
    let many: serde_json::Map<String, Value> = (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
    let (status, answer) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"metadata": many}))).await?;
    assert_error((status, &answer), StatusCode::BAD_REQUEST, "invalid_request_error");
    for raw in ["{\"title\":", "[]", "42", "{'a':1}"] {
        let (status, answer) = send(app.client(&tenant.key, Method::POST, "/sessions").body(raw)).await?;
        assert_error((status, &answer), StatusCode::BAD_REQUEST, "invalid_json");
    }
    let (_, list) = send(app.client(&tenant.key, Method::GET, "/sessions")).await?;
    assert_eq!(ids(&list).len(), 0, "a refused request stored something");
    Ok(())
}

#[tokio::test]
async fn every_sessions_route_refuses_missing_invalid_and_revoked_keys() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let session = create(&app, &tenant, json!({"title": "keep"})).await?;
    let path = format!("/sessions/{}", str_field(&session, "id")?);
    let routes = [
        (Method::POST, "/sessions".to_owned()),
        (Method::GET, "/sessions".to_owned()),
        (Method::GET, path.clone()),
        (Method::PATCH, path.clone()),
        (Method::DELETE, path.clone()),
        (Method::POST, format!("{path}/cancel")),
    ];
    let unknown_key = format!("cpeer_{}", "A".repeat(43));
    let check = |status: StatusCode, body: &Value| {
        assert_error((status, body), StatusCode::UNAUTHORIZED, "invalid_api_key")
    };
    for (method, route) in &routes {
        let url = format!("/api/client/v1{route}");
        let (status, body) = send(app.request(method.clone(), &url).json(&json!({"title": "x"}))).await?;
        check(status, &body);
        for token in [unknown_key.as_str(), "cpeer_short", "garbage", app.core_key.as_str()] {
            let (status, body) =
                send(app.client(token, method.clone(), route).json(&json!({"title": "x"}))).await?;
            check(status, &body);
        }
    }
    let revoke = format!("/core/v1/projects/{}/api_keys/{}", tenant.project_id, tenant.key_id);
    let (status, _) = send(app.core(Method::DELETE, &revoke)).await?;
    assert_eq!(status, StatusCode::OK);
    for (method, route) in &routes {
        let (status, body) =
            send(app.client(&tenant.key, method.clone(), route).json(&json!({"title": "x"}))).await?;
        check(status, &body);
    }
    // Nothing changed: the session is as it was.
    let (_, key) = app.create_key(&tenant.project_id).await?;
    let (status, body) = send(app.client(&key, Method::GET, &path)).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["title"], "keep");
    Ok(())
}

#[tokio::test]
async fn another_projects_key_sees_nothing_and_changes_nothing() -> R {
    let app = TestApp::spawn().await?;
    let owner = app.tenant().await?;
    let intruder = app.tenant().await?;
    let session = create(&app, &owner, json!({"title": "mine", "metadata": {"a": "1"}})).await?;
    let id = str_field(&session, "id")?;
    let path = format!("/sessions/{id}");

    let (status, body) = send(app.client(&intruder.key, Method::GET, &path)).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    let (status, body) =
        send(app.client(&intruder.key, Method::PATCH, &path).json(&json!({"title": "hacked"}))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    let (status, body) = send(app.client(&intruder.key, Method::DELETE, &path)).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    let (status, list) = send(app.client(&intruder.key, Method::GET, "/sessions")).await?;
    assert_eq!(status, StatusCode::OK);
    assert!(ids(&list).is_empty());
    // The owner's id is not a cursor into the intruder's list.
    let (status, body) =
        send(app.client(&intruder.key, Method::GET, &format!("/sessions?after={id}"))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "cursor_not_found");

    let (status, body) = send(app.client(&owner.key, Method::GET, &path)).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["title"], "mine");
    assert_eq!(body["metadata"], json!({"a": "1"}));
    assert_eq!(body["updated_at"], session["updated_at"]);
    Ok(())
}

#[tokio::test]
async fn reading_a_missing_malformed_or_deleted_session_is_404() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    for id in
        [uuid::Uuid::new_v4().to_string(), "abc".into(), uuid::Uuid::new_v4().to_string().to_uppercase()]
    {
        let (status, body) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{id}"))).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    }
    let session = create(&app, &tenant, json!({})).await?;
    let path = format!("/sessions/{}", str_field(&session, "id")?);
    let (status, body) = send(app.client(&tenant.key, Method::DELETE, &path)).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["deleted"], true);
    let (status, body) = send(app.client(&tenant.key, Method::GET, &path)).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    let (status, body) =
        send(app.client(&tenant.key, Method::PATCH, &path).json(&json!({"title": "x"}))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    let (status, body) = send(app.client(&tenant.key, Method::DELETE, &path)).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    let (_, list) = send(app.client(&tenant.key, Method::GET, "/sessions")).await?;
    assert!(ids(&list).is_empty(), "a deleted session is still listed");
    Ok(())
}

#[tokio::test]
async fn patching_changes_only_what_was_given() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let session = create(&app, &tenant, json!({"title": "before", "metadata": {"a": "1"}})).await?;
    let path = format!("/sessions/{}", str_field(&session, "id")?);

    let (status, body) =
        send(app.client(&tenant.key, Method::PATCH, &path).json(&json!({"metadata": {"b": "2"}}))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["title"], "before");
    assert_eq!(body["metadata"], json!({"b": "2"}));

    let (_, body) =
        send(app.client(&tenant.key, Method::PATCH, &path).json(&json!({"title": "after"}))).await?;
    assert_eq!(body["title"], "after");
    assert_eq!(body["metadata"], json!({"b": "2"}));

    let (_, body) = send(app.client(&tenant.key, Method::PATCH, &path).json(&json!({"title": null}))).await?;
    assert_eq!(body["title"], Value::Null);

    for bad in [json!({}), json!({"title": 1}), json!({"metadata": [1]}), json!({"title": "x".repeat(257)})] {
        let (status, answer) = send(app.client(&tenant.key, Method::PATCH, &path).json(&bad)).await?;
        assert_error((status, &answer), StatusCode::BAD_REQUEST, "invalid_request_error");
    }
    let (status, answer) = send(app.client(&tenant.key, Method::PATCH, &path).body("{nope")).await?;
    assert_error((status, &answer), StatusCode::BAD_REQUEST, "invalid_json");
    // The stored session kept the last valid state.
    let (_, body) = send(app.client(&tenant.key, Method::GET, &path)).await?;
    assert_eq!(body["title"], Value::Null);
    assert_eq!(body["metadata"], json!({"b": "2"}));
    assert_eq!(body["runtime_status"], "idle");
    Ok(())
}

#[tokio::test]
async fn sessions_list_pages_by_creation_time_and_id() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let mut created = Vec::new();
    for i in 0..7 {
        created.push(str_field(&create(&app, &tenant, json!({"title": format!("s{i}")})).await?, "id")?);
    }
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();

    let (status, cache, page) =
        send_with_cache(app.client(&tenant.key, Method::GET, "/sessions?limit=3")).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cache.as_deref(), Some("no-store"));
    assert_eq!(page["object"], "list");
    assert_eq!(page["has_more"], true);
    assert_eq!(ids(&page), newest_first[..3]);
    assert_eq!(page["first_id"], newest_first[0].as_str());
    assert_eq!(page["last_id"], newest_first[2].as_str());

    // Walk the rest with the cursor: every session once, in order.
    let mut seen = ids(&page);
    let mut after = str_field(&page, "last_id")?;
    loop {
        let (_, page) =
            send(app.client(&tenant.key, Method::GET, &format!("/sessions?limit=3&after={after}"))).await?;
        seen.extend(ids(&page));
        if page["has_more"] != true {
            break;
        }
        after = str_field(&page, "last_id")?;
    }
    assert_eq!(seen, newest_first);

    let (_, asc) = send(app.client(&tenant.key, Method::GET, "/sessions?order=asc&limit=100")).await?;
    assert_eq!(ids(&asc), created);
    assert_eq!(asc["has_more"], false);
    let (_, default) = send(app.client(&tenant.key, Method::GET, "/sessions")).await?;
    assert_eq!(ids(&default), newest_first, "default order is desc");

    let (_, empty) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions?after={}", created[0]))).await?;
    assert!(ids(&empty).is_empty());
    assert_eq!(empty["has_more"], false);
    assert_eq!(empty["first_id"], Value::Null);
    assert_eq!(empty["last_id"], Value::Null);

    for bad in [
        "limit=0",
        "limit=101",
        "limit=-1",
        "limit=ten",
        "order=newest",
        "order=asc&order=desc",
        "limit=2&limit=2",
    ] {
        let (status, body) = send(app.client(&tenant.key, Method::GET, &format!("/sessions?{bad}"))).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    }
    for cursor in [uuid::Uuid::new_v4().to_string(), "not-an-id".to_owned()] {
        let (status, body) =
            send(app.client(&tenant.key, Method::GET, &format!("/sessions?after={cursor}"))).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "cursor_not_found");
    }
    // A deleted session is no longer a cursor.
    let path = format!("/sessions/{}", created[3]);
    send(app.client(&tenant.key, Method::DELETE, &path)).await?;
    let (status, body) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions?after={}", created[3]))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "cursor_not_found");
    Ok(())
}
