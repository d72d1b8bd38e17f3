//! The Core admin and node surfaces' typed wire: request bodies read into request structs (a
//! wrong-typed or missing field is a 400 that names it), answers serialize from response
//! structs, and every answer's status is one the surface's OpenAPI document declares for the
//! route, with the fields its schema requires.

use agentplane_tests::{TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// The served document of `surface`.
async fn document(app: &TestApp, surface: &str) -> anyhow::Result<Value> {
    let (status, doc) = send(app.request(Method::GET, &format!("/openapi/{surface}.json"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{surface}: {status}");
    Ok(doc)
}

/// `schema` with `$ref`s resolved against `doc`.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let pointer = reference.trim_start_matches('#');
            doc.pointer(pointer).map_or(schema, |s| resolve(doc, s))
        }
        None => schema,
    }
}

/// Every property `schema` requires (through `allOf` too) is in `body`.
fn assert_required(doc: &Value, schema: &Value, body: &Value, at: &str) {
    let schema = resolve(doc, schema);
    for part in schema.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        assert_required(doc, part, body, at);
    }
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
        let name = name.as_str().unwrap_or_default();
        assert!(body.get(name).is_some(), "{at}: `{name}` is required by the document: {body}");
    }
}

/// The route's documented answer for `status`, and that `body` has what its schema requires.
#[track_caller]
fn assert_documented(doc: &Value, method: &str, path: &str, status: StatusCode, body: &Value) {
    let at = format!("{method} {path} {status}");
    let response = doc
        .pointer(&format!("/paths/{}/{method}/responses/{}", path.replace('/', "~1"), status.as_u16()))
        .unwrap_or_else(|| panic!("{at} is not documented"));
    if let Some(schema) = response.pointer("/content/application~1json/schema") {
        assert_required(doc, schema, body, &at);
    } else {
        assert_eq!(body, &Value::Null, "{at}: an undocumented body");
    }
}

#[tokio::test]
async fn core_bodies_name_the_wrong_typed_field_and_answers_follow_the_document() -> R {
    let app = TestApp::spawn().await?;
    let doc = document(&app, "core").await?;
    let project = app.create_project("wire").await?;

    // Api keys: a wrong-typed or missing name is a 400 naming it.
    let keys = format!("/core/v1/projects/{project}/api_keys");
    for bad in [json!({"name": 5}), json!({"name": ["k"]}), json!({}), json!({"name": null})] {
        let (status, body) = send(app.core(Method::POST, &keys).json(&bad)).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(body["error"]["param"], "name", "{bad}: {body}");
        assert_documented(&doc, "post", "/core/v1/projects/{project_id}/api_keys", status, &body);
    }
    let (status, created) = send(app.core(Method::POST, &keys).json(&json!({"name": "ci"}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["object"], "api_key");
    assert_eq!(created["revoked_at"], Value::Null);
    assert!(str_field(&created, "key")?.starts_with("cpeer_"));
    assert_documented(&doc, "post", "/core/v1/projects/{project_id}/api_keys", status, &created);
    let revoke = format!("{keys}/{}", str_field(&created, "id")?);
    let (status, revoked) = send(app.core(Method::DELETE, &revoke)).await?;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    assert!(revoked["revoked_at"].is_i64());
    assert!(revoked.get("key").is_none(), "the plaintext is shown once: {revoked}");
    assert_documented(&doc, "delete", "/core/v1/projects/{project_id}/api_keys/{key_id}", status, &revoked);
    let (status, body) = send(app.core(Method::DELETE, &format!("{keys}/nope"))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    assert_documented(&doc, "delete", "/core/v1/projects/{project_id}/api_keys/{key_id}", status, &body);

    // Node register: a wrong-typed or blank name is a 400 naming it; null or absent is `node`.
    for bad in [json!({"name": 5}), json!({"name": {"a": 1}}), json!({"name": "  "})] {
        let (status, body) = send(app.core(Method::POST, "/core/v1/sandbox/nodes").json(&bad)).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(body["error"]["param"], "name", "{bad}: {body}");
        assert_documented(&doc, "post", "/core/v1/sandbox/nodes", status, &body);
    }
    let (status, node) =
        send(app.core(Method::POST, "/core/v1/sandbox/nodes").json(&json!({"name": null}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{node}");
    assert_eq!(node["name"], "node");
    assert_eq!(node["object"], "sandbox_node");
    assert_eq!(node["connection_id"], Value::Null);
    assert!(str_field(&node, "token")?.starts_with("apnode_"));
    assert_documented(&doc, "post", "/core/v1/sandbox/nodes", status, &node);
    let id = str_field(&node, "id")?;

    // The node list is a list object like every other Core list.
    let (status, list) = send(app.core(Method::GET, "/core/v1/sandbox/nodes")).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["object"], "list");
    assert_eq!(list["has_more"], false);
    assert_eq!(list["first_id"], id.as_str());
    assert!(list["data"][0].get("token").is_none(), "the token is shown once: {list}");
    assert_documented(&doc, "get", "/core/v1/sandbox/nodes", status, &list);

    let detail = format!("/core/v1/sandbox/nodes/{id}");
    let (status, body) = send(app.core(Method::GET, &detail)).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_documented(&doc, "get", "/core/v1/sandbox/nodes/{node_id}", status, &body);
    let (status, body) = send(app.core(Method::GET, &format!("{detail}?range=2h"))).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request");
    assert_documented(&doc, "get", "/core/v1/sandbox/nodes/{node_id}", status, &body);

    // Runtime telemetry answers, and their errors, are the documented ones.
    let (status, page) = send(app.core(Method::GET, "/core/v1/sandbox/runtime-observations?limit=5")).await?;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_documented(&doc, "get", "/core/v1/sandbox/runtime-observations", status, &page);
    let (status, body) = send(app.core(Method::GET, "/core/v1/sandbox/runtime-observations?limit=0")).await?;
    assert_documented(&doc, "get", "/core/v1/sandbox/runtime-observations", status, &body);
    let session = uuid::Uuid::new_v4();
    let observation = format!("/core/v1/projects/{project}/sessions/{session}/runtime-observation");
    let (status, body) = send(app.core(Method::GET, &observation)).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    assert_documented(
        &doc,
        "get",
        "/core/v1/projects/{project_id}/sessions/{session_id}/runtime-observation",
        status,
        &body,
    );
    let history = format!("/core/v1/projects/{project}/sessions/{session}/runtime-history?start=x");
    let (status, body) = send(app.core(Method::GET, &history)).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_documented(
        &doc,
        "get",
        "/core/v1/projects/{project_id}/sessions/{session_id}/runtime-history",
        status,
        &body,
    );
    Ok(())
}

#[tokio::test]
async fn node_bodies_name_the_wrong_typed_field_and_answers_follow_the_document() -> R {
    let app = TestApp::spawn().await?;
    let doc = document(&app, "node").await?;
    let (_, node) =
        send(app.core(Method::POST, "/core/v1/sandbox/nodes").json(&json!({"name": "wire"}))).await?;
    let token = str_field(&node, "token")?;
    let node_call = |method: Method, path: &str| app.request(method, path).bearer_auth(&token);

    // Heartbeat: a wrong-typed or missing field is a 400 naming it, and nothing is recorded.
    let heartbeat = json!({"connection_id": "c1", "observed_at": 1_790_000_000_000_i64, "sandboxes": []});
    let cases = [
        (json!({"connection_id": 5, "observed_at": 1}), "connection_id"),
        (json!({"connection_id": "c1"}), "observed_at"),
        (json!({"connection_id": "c1", "observed_at": "soon"}), "observed_at"),
        (json!({"connection_id": "c1", "observed_at": 1, "total_memory_bytes": -1}), "total_memory_bytes"),
        (json!({"connection_id": "c1", "observed_at": 1, "sandboxes": {}}), "sandboxes"),
        (json!({"connection_id": "c1", "observed_at": 1, "cpu": {"user": "x"}}), "cpu.user"),
        (
            json!({"connection_id": "c1", "observed_at": 1, "sandboxes": [{"sandbox_id": 1}]}),
            "sandboxes[0].sandbox_id",
        ),
    ];
    for (bad, param) in cases {
        let (status, body) = send(node_call(Method::POST, "/node/v1/heartbeat").json(&bad)).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(body["error"]["param"], param, "{bad}: {body}");
        assert!(!body["error"]["message"].as_str().unwrap_or_default().contains("soon"), "{body}");
        assert_documented(&doc, "post", "/node/v1/heartbeat", status, &body);
    }
    let id = str_field(&node, "id")?;
    let (_, detail) = send(app.core(Method::GET, &format!("/core/v1/sandbox/nodes/{id}"))).await?;
    assert_eq!(detail["connection_id"], Value::Null, "a refused heartbeat records nothing: {detail}");
    let (status, body) = send(node_call(Method::POST, "/node/v1/heartbeat").json(&heartbeat)).await?;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_documented(&doc, "post", "/node/v1/heartbeat", status, &body);
    let (_, detail) = send(app.core(Method::GET, &format!("/core/v1/sandbox/nodes/{id}"))).await?;
    assert_eq!(detail["connection_id"], "c1", "{detail}");

    // Reports: the same rules.
    for (bad, param) in [
        (json!({"connection_id": "c1", "events": "none"}), "events"),
        (json!({"events": []}), "connection_id"),
        (json!({"connection_id": "c1", "events": [{"seq": "one"}]}), "events[0].seq"),
    ] {
        let (status, body) = send(node_call(Method::POST, "/node/v1/reports").json(&bad)).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(body["error"]["param"], param, "{bad}: {body}");
        assert_documented(&doc, "post", "/node/v1/reports", status, &body);
    }
    // An event of a type the API does not know is refused, not skipped.
    let unknown = json!({"connection_id": "c1", "events": [{"seq": 1, "event": {"type": "reboot"}}]});
    let (status, body) = send(node_call(Method::POST, "/node/v1/reports").json(&unknown)).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    let (status, body) =
        send(node_call(Method::POST, "/node/v1/reports").json(&json!({"connection_id": "c1", "events": []})))
            .await?;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");

    // Command outcomes: an unknown status or a wrong-typed field is a 400; an unknown command 404.
    let command = format!("/node/v1/commands/{}", uuid::Uuid::new_v4());
    for bad in
        [json!({"status": "maybe"}), json!({"status": "done", "pid": "x"}), json!({"status": "failed"})]
    {
        let (status, body) = send(node_call(Method::POST, &command).json(&bad)).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_documented(&doc, "post", "/node/v1/commands/{command_id}", status, &body);
    }
    let (status, body) = send(node_call(Method::POST, &command).json(&json!({"status": "done"}))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "not_found_error");
    assert_documented(&doc, "post", "/node/v1/commands/{command_id}", status, &body);

    // The reads.
    let (status, body) = send(node_call(Method::GET, "/node/v1/commands?connection=c1&wait=0")).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"commands": []}));
    assert_documented(&doc, "get", "/node/v1/commands", status, &body);
    let (status, body) = send(node_call(Method::GET, "/node/v1/commands?wait=0")).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    assert_documented(&doc, "get", "/node/v1/commands", status, &body);
    let (status, body) = send(node_call(Method::GET, "/node/v1/sandboxes")).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"sandboxes": []}));
    assert_documented(&doc, "get", "/node/v1/sandboxes", status, &body);
    let (status, body) = send(app.core(Method::GET, "/node/v1/sandboxes")).await?;
    assert_error((status, &body), StatusCode::UNAUTHORIZED, "invalid_node_token");
    assert_documented(&doc, "get", "/node/v1/sandboxes", status, &body);
    Ok(())
}
