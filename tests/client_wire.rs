//! The client API's typed wire: every answer matches the schema `/openapi/client.json`
//! documents for its route and status, PATCH tells `null` from an absent field, and a field of
//! the wrong type answers 400 naming it.

use std::time::Duration;

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// Where `value` breaks `schema` (a small JSON Schema reader: `$ref`, `oneOf`, `type`,
/// `enum`, literal `^…$` patterns, `required`, `properties`, `additionalProperties`, `items`).
/// A field the schema does not document is a break too, unless it allows more properties.
fn check(doc: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(name) = schema.get("$ref").and_then(Value::as_str) {
        let name = name.trim_start_matches("#/components/schemas/");
        return check(doc, &doc["components"]["schemas"][name], value, at, errors);
    }
    if let Some(options) = schema.get("oneOf").and_then(Value::as_array) {
        let matching = options
            .iter()
            .filter(|option| {
                let mut found = Vec::new();
                check(doc, option, value, at, &mut found);
                found.is_empty()
            })
            .count();
        if matching != 1 {
            errors.push(format!("{at}: {value} matches {matching} of {} oneOf options", options.len()));
        }
        return;
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let is = |t: &str| match t {
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        _ => true,
    };
    if !types.is_empty() && !types.iter().any(|t| is(t)) {
        errors.push(format!("{at}: {value} is not {types:?}"));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array).filter(|a| !a.contains(value)) {
        errors.push(format!("{at}: {value} is not one of {allowed:?}"));
    }
    if let (Some(pattern), Some(text)) = (schema.get("pattern").and_then(Value::as_str), value.as_str()) {
        let literal =
            pattern.strip_prefix('^').and_then(|p| p.strip_suffix('$')).map(|p| p.replace("\\.", "."));
        let literal = literal.filter(|l| !l.contains(['[', '(', '|', '*', '+', '?', '\\']));
        if let Some(literal) = literal.filter(|l| l != text) {
            errors.push(format!("{at}: {text:?} is not {literal:?}"));
        }
    }
    match value {
        Value::Object(map) => {
            let empty = serde_json::Map::new();
            let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
            for name in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
                if let Some(name) = name.as_str().filter(|n| !map.contains_key(*n)) {
                    errors.push(format!("{at}: the required `{name}` is missing"));
                }
            }
            for (key, field) in map {
                let here = format!("{at}.{key}");
                match (properties.get(key), schema.get("additionalProperties")) {
                    (Some(property), _) => check(doc, property, field, &here, errors),
                    (None, Some(extra)) if extra.is_object() => check(doc, extra, field, &here, errors),
                    (None, Some(Value::Bool(true))) => {}
                    (None, _) if properties.is_empty() && schema.get("additionalProperties").is_none() => {}
                    (None, _) => errors.push(format!("{here}: not in the document")),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for (i, entry) in items.iter().enumerate() {
                    check(doc, item, entry, &format!("{at}[{i}]"), errors);
                }
            }
        }
        _ => {}
    }
}

/// Checks answers against the document the gateway serves.
struct Contract {
    doc: Value,
    checked: usize,
}

impl Contract {
    async fn load(app: &TestApp) -> anyhow::Result<Self> {
        let (status, doc) = send(app.request(Method::GET, "/openapi/client.json")).await?;
        anyhow::ensure!(status == StatusCode::OK, "the client document: {status}");
        Ok(Self { doc, checked: 0 })
    }

    /// `body`, answered with `status` by `method template`, is what the document says.
    fn holds(&mut self, method: &str, template: &str, status: StatusCode, body: &Value) {
        let path = format!("/api/client/v1{template}");
        let operation = &self.doc["paths"][&path][method];
        assert!(operation.is_object(), "{method} {path} is not documented");
        let response = &operation["responses"][status.as_str()];
        assert!(response.is_object(), "{method} {path} does not document {status}: {body}");
        let schema = &response["content"]["application/json"]["schema"];
        let mut errors = Vec::new();
        check(&self.doc, schema, body, "$", &mut errors);
        assert!(errors.is_empty(), "{method} {path} {status}: {errors:#?}\n{body}");
        self.checked += 1;
    }
}

#[test]
fn the_checker_finds_undocumented_fields_wrong_types_and_missing_ones() {
    let doc = json!({"components": {"schemas": {"Thing": {
        "type": "object", "required": ["id"],
        "properties": {"id": {"type": "string"}, "n": {"type": ["integer", "null"]}, "o": {"type": "string", "pattern": "^thing$"}},
    }}}});
    let thing = json!({"$ref": "#/components/schemas/Thing"});
    let errors = |value: Value| {
        let mut found = Vec::new();
        check(&doc, &thing, &value, "$", &mut found);
        found.len()
    };
    assert_eq!(errors(json!({"id": "a", "n": null, "o": "thing"})), 0);
    assert_eq!(errors(json!({"id": "a", "extra": 1})), 1);
    assert_eq!(errors(json!({"id": 1})), 1);
    assert_eq!(errors(json!({"n": 1})), 1);
    assert_eq!(errors(json!({"id": "a", "o": "other"})), 1);
}

async fn call(
    app: &TestApp,
    tenant: &Tenant,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<(StatusCode, Value)> {
    let request = app.client(&tenant.key, method, path);
    send(match body {
        Some(body) => request.json(&body),
        None => request,
    })
    .await
}

#[tokio::test]
async fn every_client_answer_matches_its_documented_schema() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let mut contract = Contract::load(&app).await?;

    // Agents.
    let (status, agent) = call(
        &app,
        &tenant,
        Method::POST,
        "/agents",
        Some(json!({
            "name": "support", "model": "gpt-4o-mini", "instructions": "be brief",
            "config": {"execution": {"max_cost_usd": 5.0}, "humanInTheLoop": {"tool_approvals": []}},
        })),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    contract.holds("post", "/agents", status, &agent);
    let agent_id = str_field(&agent, "id")?;
    let one = format!("/agents/{agent_id}");
    let (status, body) = call(&app, &tenant, Method::GET, &one, None).await?;
    contract.holds("get", "/agents/{agent_id}", status, &body);
    let (status, body) = call(&app, &tenant, Method::GET, "/agents?limit=5", None).await?;
    contract.holds("get", "/agents", status, &body);
    let (status, body) =
        call(&app, &tenant, Method::PATCH, &one, Some(json!({"instructions": null, "max_steps": 4}))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    contract.holds("patch", "/agents/{agent_id}", status, &body);
    let (status, body) = call(&app, &tenant, Method::POST, &format!("{one}/publish"), None).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    contract.holds("post", "/agents/{agent_id}/publish", status, &body);
    let (status, body) = call(&app, &tenant, Method::GET, &format!("{one}/versions"), None).await?;
    contract.holds("get", "/agents/{agent_id}/versions", status, &body);

    // Sessions.
    let (status, session) = call(
        &app,
        &tenant,
        Method::POST,
        "/sessions",
        Some(json!({
            "agent_id": agent_id, "title": "t", "metadata": {"k": "v"},
        })),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    contract.holds("post", "/sessions", status, &session);
    let session_id = str_field(&session, "id")?;
    let path = format!("/sessions/{session_id}");
    let (status, body) = call(&app, &tenant, Method::PATCH, &path, Some(json!({"title": null}))).await?;
    contract.holds("patch", "/sessions/{session_id}", status, &body);

    // Turns, through each of the three routes.
    for (template, route, body) in [
        (
            "/responses",
            "/responses".to_owned(),
            json!({"agent": agent_id, "input": "hi", "session_id": session_id}),
        ),
        (
            "/agents/responses",
            "/agents/responses".to_owned(),
            json!({"agent": agent_id, "input": [{"role": "user", "content": "hi"}]}),
        ),
        ("/sessions/{session_id}/messages", format!("{path}/messages"), json!({"input": "again"})),
    ] {
        model.push(Reply::text("hello"));
        let (status, answer) = call(&app, &tenant, Method::POST, &route, Some(body)).await?;
        assert_eq!(status, StatusCode::OK, "{route}: {answer}");
        contract.holds("post", template, status, &answer);
    }
    let (status, body) = call(&app, &tenant, Method::GET, &path, None).await?;
    contract.holds("get", "/sessions/{session_id}", status, &body);
    let (status, body) = call(&app, &tenant, Method::GET, "/sessions", None).await?;
    contract.holds("get", "/sessions", status, &body);
    let (status, events) =
        call(&app, &tenant, Method::GET, &format!("{path}/events?limit=100"), None).await?;
    assert!(events["data"].as_array().is_some_and(|d| d.len() > 3), "{events}");
    contract.holds("get", "/sessions/{session_id}/events", status, &events);

    // The stream's `data:` lines are documented events.
    let mut stream = app.client(&tenant.key, Method::GET, &format!("{path}/events/stream")).send().await?;
    assert_eq!(stream.status(), StatusCode::OK);
    let content_type = stream.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    assert!(content_type.starts_with("text/event-stream"), "{content_type}");
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !text.contains("\ndata: ") || !text.ends_with("\n\n") {
        let chunk = tokio::time::timeout_at(deadline, stream.chunk()).await??;
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap_or_default()));
    }
    drop(stream);
    let event_schema = json!({"$ref": "#/components/schemas/Event"});
    for line in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let mut errors = Vec::new();
        check(&contract.doc, &event_schema, &serde_json::from_str(line)?, "$", &mut errors);
        assert!(errors.is_empty(), "{errors:#?}\n{line}");
    }

    // Errors, in the shape each status documents.
    let (status, body) = call(&app, &tenant, Method::PATCH, &path, Some(json!({"title": 5}))).await?;
    contract.holds("patch", "/sessions/{session_id}", status, &body);
    let (status, body) = send(app.request(Method::GET, "/api/client/v1/sessions")).await?;
    contract.holds("get", "/sessions", status, &body);
    let (status, body) = call(&app, &tenant, Method::GET, "/sessions/nope", None).await?;
    contract.holds("get", "/sessions/{session_id}", status, &body);
    let (status, body) =
        call(&app, &tenant, Method::POST, "/responses", Some(json!({"input": "hi"}))).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    contract.holds("post", "/responses", status, &body);
    let (status, body) = call(&app, &tenant, Method::GET, &format!("{one}/versions?after=99"), None).await?;
    contract.holds("get", "/agents/{agent_id}/versions", status, &body);

    let (status, body) = call(&app, &tenant, Method::DELETE, &path, None).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    contract.holds("delete", "/sessions/{session_id}", status, &body);
    assert!(contract.checked >= 20);
    Ok(())
}

#[tokio::test]
async fn a_session_patch_tells_null_from_an_absent_field() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let (_, session) = call(
        &app,
        &tenant,
        Method::POST,
        "/sessions",
        Some(json!({"title": "keep", "metadata": {"a": "b"}})),
    )
    .await?;
    let path = format!("/sessions/{}", str_field(&session, "id")?);

    // Absent: left as it is.
    let (status, body) =
        call(&app, &tenant, Method::PATCH, &path, Some(json!({"metadata": {"c": "d"}}))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((&body["title"], &body["metadata"]), (&json!("keep"), &json!({"c": "d"})));
    let (status, body) = call(&app, &tenant, Method::PATCH, &path, Some(json!({"title": "new"}))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((&body["title"], &body["metadata"]), (&json!("new"), &json!({"c": "d"})));

    // `null`: cleared.
    let (_, body) = call(&app, &tenant, Method::PATCH, &path, Some(json!({"title": null}))).await?;
    assert_eq!((&body["title"], &body["metadata"]), (&Value::Null, &json!({"c": "d"})));
    let (_, body) = call(&app, &tenant, Method::PATCH, &path, Some(json!({"metadata": null}))).await?;
    assert_eq!((&body["title"], &body["metadata"]), (&Value::Null, &json!({})));

    // Neither: refused, and what is stored stays.
    let (status, body) = call(&app, &tenant, Method::PATCH, &path, Some(json!({"other": 1}))).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    let (_, read) = call(&app, &tenant, Method::GET, &path, None).await?;
    assert_eq!((&read["title"], &read["metadata"]), (&Value::Null, &json!({})));
    Ok(())
}

#[tokio::test]
async fn a_wrong_typed_field_answers_400_naming_it_without_quoting_it() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let (_, session) = call(&app, &tenant, Method::POST, "/sessions", Some(json!({"title": "keep"}))).await?;
    let path = format!("/sessions/{}", str_field(&session, "id")?);
    let secret = "s3cret-value-".repeat(4);
    for (method, route, body, param) in [
        (Method::PATCH, path.as_str(), json!({"title": [secret]}), "title"),
        (Method::PATCH, path.as_str(), json!({"metadata": {"k": 7}}), "metadata.k"),
        (Method::PATCH, path.as_str(), json!({"metadata": secret}), "metadata"),
        (Method::POST, "/sessions", json!({"environment_mode": true}), "environment_mode"),
        (Method::POST, "/sessions", json!({"agent_id": {"id": secret}}), "agent_id"),
        (Method::POST, "/sessions", json!({"metadata": {"k": [secret]}}), "metadata.k"),
    ] {
        let (status, answer) = call(&app, &tenant, method.clone(), route, Some(body.clone())).await?;
        assert_error((status, &answer), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(answer["error"]["param"], param, "{method} {route} {body}: {answer}");
        assert!(!answer.to_string().contains("s3cret"), "{answer}");
    }
    let (_, read) = call(&app, &tenant, Method::GET, &path, None).await?;
    assert_eq!(read["title"], "keep");
    let (_, list) = call(&app, &tenant, Method::GET, "/sessions", None).await?;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1), "a refused create stored something");
    Ok(())
}

/// The actions routes' answers, each type answered, and their errors: what the document says.
/// (No turn pauses here: the actions are written as a pausing turn writes them.)
#[tokio::test]
async fn every_action_answer_matches_its_documented_schema() -> R {
    use agentplane_domain::action::{Action, ActionId, ActionStatus, ActionType};
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let mut contract = Contract::load(&app).await?;
    let (status, session) = call(&app, &tenant, Method::POST, "/sessions", Some(json!({}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let session_id = str_field(&session, "id")?;
    let cases = [
        (ActionType::Approval, json!({"decision": "deny", "reason": "no"})),
        (ActionType::Approval, json!({"decision": "approve"})),
        (ActionType::Question, json!({"answers": {"Some Key": [1, "x"]}})),
        (ActionType::ClientTool, json!({"output": "plain text"})),
    ];
    let one = "/sessions/{session_id}/actions/{action_id}";
    for (n, (kind, answer)) in cases.into_iter().enumerate() {
        let mut random = [0u8; 12];
        random.copy_from_slice(&uuid::Uuid::new_v4().into_bytes()[..12]);
        let action = Action {
            id: ActionId::from_random(random),
            project_id: tenant.project_id.parse().map_err(|e| anyhow::anyhow!("{e:?}"))?,
            session_id: session_id.parse().map_err(|e| anyhow::anyhow!("{e:?}"))?,
            turn_id: format!("turn_{n}"),
            pause_version: 1,
            call_id: format!("call_{n}"),
            kind,
            status: ActionStatus::Pending,
            tool: if kind == ActionType::Question { "ask_user" } else { "some_tool" }.to_owned(),
            args: json!({"question": "Which?", "n": n}),
            question: (kind == ActionType::Question).then(|| "Which?".to_owned()),
            answer: None,
            created_at: agentplane_domain::Timestamp::from_unix_millis(1_700_000_000_000),
            expires_at: Some(agentplane_domain::Timestamp::from_unix_millis(4_000_000_000_000)),
            settled_at: None,
            answer_key_ids: None,
        };
        let put = agentplane_store::dynamo::actions::put_new(&app.store, &action)?;
        app.store
            .dynamo
            .transact_write_items()
            .transact_items(aws_sdk_dynamodb::types::TransactWriteItem::builder().put(put).build())
            .send()
            .await?;
        let path = format!("/sessions/{session_id}/actions/{}", action.id);
        let (status, body) = call(&app, &tenant, Method::GET, &path, None).await?;
        assert_eq!(status, StatusCode::OK, "{body}");
        contract.holds("get", one, status, &body);
        let (status, body) = call(&app, &tenant, Method::POST, &path, Some(json!({"nope": 1}))).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        contract.holds("post", one, status, &body);
        let (status, body) = call(&app, &tenant, Method::POST, &path, Some(answer.clone())).await?;
        assert_eq!(status, StatusCode::OK, "{body}");
        contract.holds("post", one, status, &body);
        let (status, body) = call(&app, &tenant, Method::POST, &path, Some(answer)).await?;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        contract.holds("post", one, status, &body);
    }
    let list = format!("/sessions/{session_id}/actions");
    let (status, body) = call(&app, &tenant, Method::GET, &list, None).await?;
    assert_eq!(body["data"].as_array().map(Vec::len), Some(4), "{body}");
    contract.holds("get", "/sessions/{session_id}/actions", status, &body);
    let (status, body) = call(&app, &tenant, Method::GET, &format!("{list}?status=nope"), None).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    contract.holds("get", "/sessions/{session_id}/actions", status, &body);
    let (status, body) = call(&app, &tenant, Method::GET, &format!("{list}/act_nope"), None).await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    contract.holds("get", one, status, &body);
    assert_eq!(contract.checked, 19);
    Ok(())
}
