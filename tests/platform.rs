//! The Platform API (`/v1`): its envelope (`{data}`, camelCase, `X-Request-Id` on every answer,
//! errors `{"error":{"code","message","requestId","details"?}}`), strict bodies, environments
//! and the sessions in them (keyset lists; another project's or environment's → 404).

use agentplane_tests::{TestApp, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// Sends and returns status, the `X-Request-Id` header and the JSON body.
async fn call(request: reqwest::RequestBuilder) -> anyhow::Result<(StatusCode, String, Value)> {
    let response = request.send().await?;
    let status = response.status();
    let id = response.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let text = response.text().await?;
    Ok((status, id, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// An error answer in the `/v1` envelope: exactly `code`, `message`, `requestId` (the header's)
/// and maybe `details`; returns the code.
fn envelope(status: StatusCode, id: &str, body: &Value) -> String {
    assert!(id.starts_with("req_") && id.len() == 28, "request id {id:?}");
    let error = body.get("error").and_then(Value::as_object).unwrap_or_else(|| panic!("{status} {body}"));
    for key in error.keys() {
        assert!(
            ["code", "message", "requestId", "details"].contains(&key.as_str()),
            "extra `{key}` in {body}"
        );
    }
    assert_eq!(body.as_object().map(|o| o.len()), Some(1), "{body}");
    assert_eq!(error.get("requestId").and_then(Value::as_str), Some(id), "{body}");
    assert!(error.get("message").and_then(Value::as_str).is_some_and(|m| !m.is_empty()), "{body}");
    error.get("code").and_then(Value::as_str).unwrap_or_default().to_owned()
}

fn data_id(body: &Value) -> String {
    body.pointer("/data/id")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no data.id in {body}"))
        .to_owned()
}

async fn environment(app: &TestApp, key: &str, name: &str) -> anyhow::Result<String> {
    let (status, _, body) =
        call(app.v1(key, Method::POST, "/environments").json(&json!({ "name": name }))).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    Ok(data_id(&body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn environments_are_created_listed_and_read_in_the_surface_style() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let (status, id, body) =
        call(app.v1(&tenant.key, Method::POST, "/environments").json(&json!({ "name": "repo" }))).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(id.starts_with("req_"), "{id}");
    let data = body["data"].as_object().expect("data");
    let mut keys: Vec<&str> = data.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["createdAt", "id", "name", "runCount"], "{body}");
    assert_eq!(data["name"], "repo");
    assert_eq!(data["runCount"], 0);
    let created = data["createdAt"].as_str().expect("createdAt");
    assert!(created.ends_with('Z') && created.contains('T'), "{created}");
    let env = data_id(&body);

    let (status, other_id, got) =
        call(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}"))).await?;
    assert_eq!(status, StatusCode::OK);
    assert_ne!(other_id, id, "one id per request");
    assert_eq!(got, body);

    // An empty body is an unnamed environment.
    let (status, _, unnamed) = call(app.v1(&tenant.key, Method::POST, "/environments")).await?;
    assert_eq!(status, StatusCode::CREATED, "{unnamed}");
    assert!(unnamed["data"].get("name").is_none(), "{unnamed}");

    // Keyset pages, newest first.
    let (status, _, page) = call(app.v1(&tenant.key, Method::GET, "/environments?limit=1")).await?;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(page["hasMore"], true);
    assert_eq!(page["data"][0]["id"], unnamed["data"]["id"]);
    let last = page["lastId"].as_str().expect("lastId");
    let (_, _, next) =
        call(app.v1(&tenant.key, Method::GET, &format!("/environments?limit=1&after={last}"))).await?;
    assert_eq!(next["data"][0]["id"].as_str(), Some(env.as_str()), "{next}");
    assert_eq!(next["hasMore"], false);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_refusal_is_the_v1_envelope_with_the_request_id() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let env = environment(&app, &tenant.key, "e").await?;

    // No token, a wrong one: 401.
    let (status, id, body) = call(app.request(Method::GET, "/v1/environments")).await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(envelope(status, &id, &body), "invalid_api_token");
    let (status, id, body) = call(app.v1("cpeer_nope", Method::GET, "/environments")).await?;
    assert_eq!(
        (status, envelope(status, &id, &body).as_str()),
        (StatusCode::UNAUTHORIZED, "invalid_api_token")
    );

    // Strict bodies: an unknown field is refused, named; a wrong type names the field.
    let (status, id, body) =
        call(app.v1(&tenant.key, Method::POST, "/environments").json(&json!({ "name": "x", "nmae": 1 })))
            .await?;
    assert_eq!((status, envelope(status, &id, &body).as_str()), (StatusCode::BAD_REQUEST, "invalid_request"));
    assert_eq!(body.pointer("/error/details/param"), Some(&json!("nmae")), "{body}");
    let (status, id, body) =
        call(app.v1(&tenant.key, Method::POST, "/environments").json(&json!({ "name": 7 }))).await?;
    assert_eq!((status, envelope(status, &id, &body).as_str()), (StatusCode::BAD_REQUEST, "invalid_request"));
    assert_eq!(body.pointer("/error/details/param"), Some(&json!("name")), "{body}");
    let (status, id, body) =
        call(app.v1(&tenant.key, Method::POST, "/environments").json(&json!({ "name": "" }))).await?;
    assert_eq!((status, envelope(status, &id, &body).as_str()), (StatusCode::BAD_REQUEST, "invalid_request"));
    let (status, id, body) =
        call(app.v1(&tenant.key, Method::POST, "/environments").body("{not json")).await?;
    assert_eq!((status, envelope(status, &id, &body).as_str()), (StatusCode::BAD_REQUEST, "invalid_json"));
    let (status, id, body) = call(
        app.v1(&tenant.key, Method::POST, &format!("/environments/{env}/sessions"))
            .json(&json!({ "agent_id": "a" })),
    )
    .await?;
    assert_eq!((status, envelope(status, &id, &body).as_str()), (StatusCode::BAD_REQUEST, "invalid_request"));

    // Page parameters, unknown routes and methods, oversized bodies: all in this envelope.
    let (status, id, body) = call(app.v1(&tenant.key, Method::GET, "/environments?limit=0")).await?;
    assert_eq!((status, envelope(status, &id, &body).as_str()), (StatusCode::BAD_REQUEST, "invalid_request"));
    assert_eq!(body.pointer("/error/details/param"), Some(&json!("limit")), "{body}");
    let (status, id, body) = call(app.v1(&tenant.key, Method::GET, "/nowhere")).await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    envelope(status, &id, &body);
    let (status, id, body) = call(app.v1(&tenant.key, Method::PATCH, "/environments")).await?;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    envelope(status, &id, &body);
    let big = "x".repeat(1024 * 1024 + 10);
    let (status, id, body) = call(app.v1(&tenant.key, Method::POST, "/environments").body(big)).await?;
    assert_eq!(
        (status, envelope(status, &id, &body).as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "request_too_large")
    );

    // Malformed and unknown ids are 404s.
    for path in ["/environments/nope".to_owned(), format!("/environments/{}", uuid::Uuid::new_v4())] {
        let (status, id, body) = call(app.v1(&tenant.key, Method::GET, &path)).await?;
        assert_eq!(
            (status, envelope(status, &id, &body).as_str()),
            (StatusCode::NOT_FOUND, "environment_not_found")
        );
    }
    let (status, id, body) =
        call(app.v1(&tenant.key, Method::GET, &format!("/environments?after={}", uuid::Uuid::new_v4())))
            .await?;
    assert_eq!((status, envelope(status, &id, &body).as_str()), (StatusCode::NOT_FOUND, "cursor_not_found"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_live_in_their_environment_and_are_the_client_apis_sessions() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let env = environment(&app, &tenant.key, "a").await?;
    let other_env = environment(&app, &tenant.key, "b").await?;
    let mut ids = Vec::new();
    for n in 0..3 {
        let (status, _, body) = call(
            app.v1(&tenant.key, Method::POST, &format!("/environments/{env}/sessions"))
                .json(&json!({ "title": format!("s{n}"), "metadata": { "n": n.to_string() } })),
        )
        .await?;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let data = body["data"].as_object().expect("data");
        let mut keys: Vec<&str> = data.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["createdAt", "environmentId", "id", "metadata", "status", "title", "updatedAt"]);
        assert_eq!(data["environmentId"].as_str(), Some(env.as_str()));
        assert_eq!(data["status"], "idle");
        ids.push(data_id(&body));
    }
    // One in the other environment: not in the first's list, not readable under it.
    let (status, _, elsewhere) =
        call(app.v1(&tenant.key, Method::POST, &format!("/environments/{other_env}/sessions"))).await?;
    assert_eq!(status, StatusCode::CREATED, "{elsewhere}");
    let elsewhere = data_id(&elsewhere);
    let (status, id, body) =
        call(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}/sessions/{elsewhere}"))).await?;
    assert_eq!((status, envelope(status, &id, &body).as_str()), (StatusCode::NOT_FOUND, "session_not_found"));

    let (status, _, got) =
        call(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}/sessions/{}", ids[0]))).await?;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["data"]["title"], "s0");
    assert_eq!(got["data"]["metadata"], json!({ "n": "0" }));

    // Keyset pages of the environment's sessions, oldest first with `order=asc`.
    let mut seen = Vec::new();
    let mut after = String::new();
    loop {
        let (status, _, page) = call(app.v1(
            &tenant.key,
            Method::GET,
            &format!("/environments/{env}/sessions?limit=2&order=asc{after}"),
        ))
        .await?;
        assert_eq!(status, StatusCode::OK, "{page}");
        for item in page["data"].as_array().expect("data") {
            seen.push(item["id"].as_str().expect("id").to_owned());
        }
        if page["hasMore"] != true {
            break;
        }
        after = format!("&after={}", page["lastId"].as_str().expect("lastId"));
    }
    assert_eq!(seen, ids);
    // A session of another environment is no cursor of this list.
    let (status, id, body) =
        call(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}/sessions?after={elsewhere}")))
            .await?;
    assert_eq!((status, envelope(status, &id, &body).as_str()), (StatusCode::NOT_FOUND, "cursor_not_found"));

    // The same session item the client API reads.
    let (status, client) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{}", ids[1]))).await?;
    assert_eq!(status, StatusCode::OK, "{client}");
    assert_eq!(client["title"], "s1");

    // Sessions of an environment that does not exist: 404, nothing created.
    let missing = uuid::Uuid::new_v4();
    let (status, id, body) =
        call(app.v1(&tenant.key, Method::POST, &format!("/environments/{missing}/sessions"))).await?;
    assert_eq!(
        (status, envelope(status, &id, &body).as_str()),
        (StatusCode::NOT_FOUND, "environment_not_found")
    );
    let (_, all) = send(app.client(&tenant.key, Method::GET, "/sessions?limit=100")).await?;
    assert_eq!(all["data"].as_array().map(Vec::len), Some(4), "{all}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn another_projects_environment_and_sessions_are_404() -> R {
    let app = TestApp::spawn().await?;
    let owner = app.tenant().await?;
    let stranger = app.tenant().await?;
    let env = environment(&app, &owner.key, "mine").await?;
    let (_, _, session) =
        call(app.v1(&owner.key, Method::POST, &format!("/environments/{env}/sessions"))).await?;
    let session = data_id(&session);
    let probes = [
        (Method::GET, format!("/environments/{env}")),
        (Method::GET, format!("/environments/{env}/sessions")),
        (Method::POST, format!("/environments/{env}/sessions")),
        (Method::GET, format!("/environments/{env}/sessions/{session}")),
    ];
    for (method, path) in probes {
        let (status, id, body) = call(app.v1(&stranger.key, method.clone(), &path)).await?;
        assert_eq!(
            (status, envelope(status, &id, &body).as_str()),
            (StatusCode::NOT_FOUND, "environment_not_found"),
            "{method} {path}"
        );
    }
    let (status, _, list) = call(app.v1(&stranger.key, Method::GET, "/environments")).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["data"], json!([]));
    let (status, _, list) =
        call(app.v1(&stranger.key, Method::GET, &format!("/environments?after={env}"))).await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{list}");
    Ok(())
}
