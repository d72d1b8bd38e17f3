//! A Response after its call, over HTTP: `GET /responses/{id}` reads the session's latest turn
//! back (ended, paused), `POST …/cancel` ends a paused turn, `DELETE` deletes the session, and
//! `GET …/input_items` pages the session's user messages. Ids of another project, of nothing,
//! or of no shape at all are 404.

use std::time::{Duration, Instant};

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{MODEL_KEY, Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn setup(extra: Value) -> anyhow::Result<(ScriptedModel, TestApp, Tenant, String)> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let mut body =
        json!({"name": "helper", "model": "gpt-4o-mini", "instructions": "Be brief.", "tools": ["add"]});
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    let agent = app.create_agent(&tenant.key, body).await?;
    Ok((model, app, tenant, agent))
}

async fn call(
    app: &TestApp,
    tenant: &Tenant,
    method: Method,
    path: &str,
) -> anyhow::Result<(StatusCode, Value)> {
    send(app.client(&tenant.key, method, path)).await
}

async fn respond(app: &TestApp, tenant: &Tenant, body: Value) -> anyhow::Result<Value> {
    let (status, body) = send(app.client(&tenant.key, Method::POST, "/responses").json(&body)).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    Ok(body)
}

#[tokio::test]
async fn a_completed_turn_reads_back_as_its_call_answered_it() -> R {
    let (model, app, tenant, agent) = setup(json!({})).await?;
    model.push(Reply::text("Hello there"));
    let answered =
        respond(&app, &tenant, json!({"agent": agent, "input": "hi", "metadata": {"k": "v"}})).await?;
    let id = str_field(&answered, "id")?;
    let (status, body) = call(&app, &tenant, Method::GET, &format!("/responses/{id}")).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["id"], id.as_str());
    assert_eq!(body["object"], "response");
    assert_eq!(
        (body["status"].clone(), body["stop_reason"].clone()),
        (json!("completed"), json!("completed"))
    );
    assert_eq!(body["output_text"], "Hello there");
    assert_eq!(body["output"], answered["output"], "the same items with the same ids");
    assert_eq!(body["output"][0]["content"][0]["text"], "Hello there");
    assert_eq!(body["usage"]["input_tokens"], 10);
    assert_eq!(body["usage"]["output_tokens"], 5);
    assert_eq!(body["usage"]["total_tokens"], 15);
    assert_eq!(body["usage"]["cost_usd"], answered["usage"]["cost_usd"]);
    for field in ["session_id", "turn_id", "agent", "model", "metadata"] {
        assert_eq!(body[field], answered[field], "{field}");
    }
    assert_eq!(body["agent"]["id"], agent.as_str());
    assert_eq!(body["model"], "gpt-4o-mini");
    assert!(body.get("required_action").is_none(), "{body}");

    // A later turn is what the Response reads then.
    model.push(Reply::text("Again"));
    let session = str_field(&answered, "session_id")?;
    let (status, second) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/messages"))
            .json(&json!({"input": "once more"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{second}");
    let (_, body) = call(&app, &tenant, Method::GET, &format!("/responses/{id}")).await?;
    assert_eq!(body["output_text"], "Again");
    assert_eq!(body["turn_id"], second["turn_id"]);
    assert_ne!(body["turn_id"], answered["turn_id"]);
    Ok(())
}

#[tokio::test]
async fn a_paused_turn_reads_requires_action_and_a_cancel_ends_it() -> R {
    let (model, app, tenant, agent) =
        setup(json!({"config": {"humanInTheLoop": {"tool_approvals": ["add"]}}})).await?;
    model.push(Reply::tool("call_1", "add", &json!({"a": 2, "b": 3})));
    let paused = respond(&app, &tenant, json!({"agent": agent, "input": "add 2 and 3"})).await?;
    assert_eq!(paused["status"], "requires_action", "{paused}");
    let action = str_field(&paused["required_action"]["actions"][0], "id")?;
    let id = str_field(&paused, "id")?;

    let (status, body) = call(&app, &tenant, Method::GET, &format!("/responses/{id}")).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (body["status"].clone(), body["stop_reason"].clone()),
        (json!("requires_action"), json!("requires_action"))
    );
    assert_eq!(body["required_action"]["type"], "actions");
    let actions = body["required_action"]["actions"].as_array().cloned().unwrap_or_default();
    assert_eq!(actions.len(), 1, "{body}");
    assert_eq!((actions[0]["id"].clone(), actions[0]["tool"].clone()), (json!(action), json!("add")));
    assert_eq!(body["output"], paused["output"]);
    assert_eq!(body["output"][0]["type"], "mcp_approval_request");
    assert_eq!(body["output"][0]["id"], action.as_str());

    // Cancel: the paused turn ends at once, and the Response says so.
    let (status, body) = call(&app, &tenant, Method::POST, &format!("/responses/{id}/cancel")).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (body["status"].clone(), body["stop_reason"].clone()),
        (json!("incomplete"), json!("cancelled"))
    );
    assert!(body.get("required_action").is_none(), "{body}");
    let (_, again) = call(&app, &tenant, Method::GET, &format!("/responses/{id}")).await?;
    assert_eq!(
        (again["status"].clone(), again["stop_reason"].clone()),
        (json!("incomplete"), json!("cancelled"))
    );
    let session = str_field(&paused, "session_id")?;
    let (_, action_body) =
        call(&app, &tenant, Method::GET, &format!("/sessions/{session}/actions/{action}")).await?;
    assert_eq!(action_body["status"], "cancelled");

    // Nothing left to cancel: as the session's cancel answers.
    let (status, body) = call(&app, &tenant, Method::POST, &format!("/responses/{id}/cancel")).await?;
    assert_error((status, &body), StatusCode::CONFLICT, "nothing_to_cancel");
    assert_eq!(model.requests().len(), 1, "nothing ran after the pause");
    Ok(())
}

#[tokio::test]
async fn a_running_turn_reads_in_progress_until_its_cancel_ends_it() -> R {
    // A model call may take longer than the slow reply (the default test timeout is shorter).
    let slow = Duration::from_secs(8);
    let model = ScriptedModel::start().await?;
    let base_url = model.base_url.clone();
    let app = TestApp::spawn_with(move |app| {
        app.with_model(agentplane_engine::ModelConfig {
            base_url,
            api_key: Some(MODEL_KEY.into()),
            call_timeout: Duration::from_secs(60),
            max_retries: 0,
            initial_backoff: Duration::from_millis(20),
        })
    })
    .await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "slow", "model": "gpt-4o-mini", "instructions": "Be brief."}),
        )
        .await?;
    let (status, session) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let session = str_field(&session, "id")?;
    model.push(Reply::Hang(slow));
    let request = app
        .client(&tenant.key, Method::POST, "/responses")
        .json(&json!({"agent": agent, "input": "take your time", "session_id": session}));
    let turn = tokio::spawn(send(request));
    let started = Instant::now();
    while model.requests().is_empty() {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "the model was never called");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let id = format!("resp_{session}");
    let (status, body) = call(&app, &tenant, Method::GET, &format!("/responses/{id}")).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (body["status"].clone(), body["stop_reason"].clone()),
        (json!("in_progress"), json!("in_progress"))
    );
    assert_eq!(body["output"], json!([]));
    assert_eq!(body["output_text"], "");
    assert_eq!(body["usage"]["total_tokens"], 0);
    assert_eq!(body["agent"]["id"], agent.as_str());

    // The cancel is recorded at once; the turn stops at its next step.
    let asked = Instant::now();
    let (status, body) = call(&app, &tenant, Method::POST, &format!("/responses/{id}/cancel")).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(asked.elapsed() < slow, "the cancel waited for the turn");
    assert_eq!(body["status"], "in_progress");
    let (status, answered) = turn.await??;
    assert_eq!((status, answered["stop_reason"].clone()), (StatusCode::OK, json!("cancelled")), "{answered}");
    let (_, body) = call(&app, &tenant, Method::GET, &format!("/responses/{id}")).await?;
    assert_eq!(
        (body["status"].clone(), body["stop_reason"].clone()),
        (json!("incomplete"), json!("cancelled"))
    );
    assert_eq!(body["usage"], answered["usage"], "the end's totals");
    assert_eq!(body["turn_id"], answered["turn_id"]);
    Ok(())
}

#[tokio::test]
async fn a_deleted_response_is_gone_with_its_session() -> R {
    let (model, app, tenant, agent) = setup(json!({})).await?;
    model.push(Reply::text("bye"));
    let answered = respond(&app, &tenant, json!({"agent": agent, "input": "hi"})).await?;
    let id = str_field(&answered, "id")?;
    let session = str_field(&answered, "session_id")?;
    let (status, body) = call(&app, &tenant, Method::DELETE, &format!("/responses/{id}")).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"id": id, "object": "response", "deleted": true}));
    for path in
        [format!("/responses/{id}"), format!("/responses/{id}/input_items"), format!("/sessions/{session}")]
    {
        let (status, body) = call(&app, &tenant, Method::GET, &path).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    }
    let (status, body) = call(&app, &tenant, Method::DELETE, &format!("/responses/{id}")).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    Ok(())
}

#[tokio::test]
async fn input_items_page_the_sessions_user_messages() -> R {
    let (model, app, tenant, agent) = setup(json!({})).await?;
    model.push(Reply::text("one"));
    model.push(Reply::text("two"));
    let answered = respond(&app, &tenant, json!({"agent": agent, "input": "first"})).await?;
    let session = str_field(&answered, "session_id")?;
    let id = str_field(&answered, "id")?;
    let (status, _) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/messages"))
            .json(&json!({"input": "second"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK);

    let texts = |page: &Value| -> Vec<String> {
        page["data"]
            .as_array()
            .map(|items| {
                items.iter().filter_map(|i| i["content"][0]["text"].as_str().map(str::to_owned)).collect()
            })
            .unwrap_or_default()
    };
    let items = format!("/responses/{id}/input_items");
    let (status, page) = call(&app, &tenant, Method::GET, &items).await?;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["object"], "list");
    assert_eq!(texts(&page), ["second", "first"], "newest first by default");
    assert_eq!(page["has_more"], false);
    let first = &page["data"][1];
    assert_eq!(first["type"], "message");
    assert_eq!(first["role"], "user");
    assert_eq!(first["status"], "completed");
    assert_eq!(first["content"][0]["type"], "input_text");
    // The first turn's log: turn.started (1), message.user (2).
    assert_eq!(first["id"], format!("msg_{session}_2"));
    assert_eq!(page["first_id"], page["data"][0]["id"]);
    assert_eq!(page["last_id"], first["id"]);

    let (_, asc) = call(&app, &tenant, Method::GET, &format!("{items}?order=asc&limit=1")).await?;
    assert_eq!(texts(&asc), ["first"]);
    assert_eq!(asc["has_more"], true);
    let after = str_field(&asc, "last_id")?;
    let (_, next) =
        call(&app, &tenant, Method::GET, &format!("{items}?order=asc&limit=1&after={after}")).await?;
    assert_eq!(texts(&next), ["second"]);
    assert_eq!(next["has_more"], false);
    let (_, desc) = call(&app, &tenant, Method::GET, &format!("{items}?limit=1")).await?;
    assert_eq!((texts(&desc), desc["has_more"].clone()), (vec!["second".to_owned()], json!(true)));
    let after = str_field(&desc, "last_id")?;
    let (_, older) = call(&app, &tenant, Method::GET, &format!("{items}?limit=1&after={after}")).await?;
    assert_eq!((texts(&older), older["has_more"].clone()), (vec!["first".to_owned()], json!(false)));

    // Bad page parameters name themselves.
    let other = "after=msg_00000000-0000-4000-8000-000000000000_2";
    for (query, param) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=x", "limit"),
        ("order=up", "order"),
        ("after=nope", "after"),
        (other, "after"),
    ] {
        let (status, body) = call(&app, &tenant, Method::GET, &format!("{items}?{query}")).await?;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["error"]["param"], param, "{query}: {body}");
    }
    Ok(())
}

#[tokio::test]
async fn unknown_malformed_and_other_projects_responses_are_not_found() -> R {
    let (model, app, tenant, agent) = setup(json!({})).await?;
    model.push(Reply::text("mine"));
    let answered = respond(&app, &tenant, json!({"agent": agent, "input": "hi"})).await?;
    let id = str_field(&answered, "id")?;
    let session = str_field(&answered, "session_id")?;
    let stranger = app.tenant().await?;

    let missing = "resp_00000000-0000-4000-8000-000000000000".to_owned();
    for (who, id) in [
        (&tenant, missing),
        (&tenant, "resp_nope".to_owned()),
        (&tenant, session.clone()),
        (&tenant, format!("msg_{session}")),
        (&stranger, id.clone()),
    ] {
        for (method, path) in [
            (Method::GET, format!("/responses/{id}")),
            (Method::GET, format!("/responses/{id}/input_items")),
            (Method::POST, format!("/responses/{id}/cancel")),
            (Method::DELETE, format!("/responses/{id}")),
        ] {
            let (status, body) = call(&app, who, method.clone(), &path).await?;
            assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
        }
    }
    // A session with no turn yet has no Response.
    let (status, empty) = send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{empty}");
    let empty = str_field(&empty, "id")?;
    let (status, body) = call(&app, &tenant, Method::GET, &format!("/responses/resp_{empty}")).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");

    // The stranger's attempts changed nothing.
    let (status, body) = call(&app, &tenant, Method::GET, &format!("/responses/{id}")).await?;
    assert_eq!((status, body["output_text"].clone()), (StatusCode::OK, json!("mine")), "{body}");
    Ok(())
}
