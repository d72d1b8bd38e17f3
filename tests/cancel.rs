//! Cancelling a running turn (`POST /api/client/v1/sessions/{id}/cancel`) over HTTP, against a
//! scripted model whose reply is slow: the turn stops at its next step, makes no further model
//! call, ends `cancelled` and releases the session; its Responses call answers `incomplete`.

use std::time::{Duration, Instant};

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{MODEL_KEY, Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

type R = anyhow::Result<()>;

/// How long the scripted model sits on its reply: the window in which the cancel lands.
const SLOW_REPLY: Duration = Duration::from_secs(8);

async fn setup() -> anyhow::Result<(ScriptedModel, TestApp, Tenant, String)> {
    let model = ScriptedModel::start().await?;
    let base_url = model.base_url.clone();
    // A model call may take longer than the slow reply (the default test timeout is shorter).
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
            json!({"name": "helper", "model": "gpt-4o-mini", "instructions": "Be brief.", "tools": ["echo"]}),
        )
        .await?;
    Ok((model, app, tenant, agent))
}

async fn new_session(app: &TestApp, tenant: &Tenant, agent: &str) -> anyhow::Result<String> {
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": agent}))).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {body}");
    str_field(&body, "id")
}

/// Starts a turn in `session` whose model call hangs, and waits until the model has it.
async fn start_slow_turn(
    model: &ScriptedModel,
    app: &TestApp,
    tenant: &Tenant,
    agent: &str,
    session: &str,
) -> anyhow::Result<JoinHandle<anyhow::Result<(StatusCode, Value)>>> {
    model.push(Reply::Hang(SLOW_REPLY));
    let calls_before = model.requests().len();
    let request = app
        .client(&tenant.key, Method::POST, "/responses")
        .json(&json!({"agent": agent, "input": "take your time", "session_id": session}));
    let turn = tokio::spawn(send(request));
    let started = Instant::now();
    while model.requests().len() == calls_before {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "the model was never called");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(turn)
}

fn cancel(app: &TestApp, key: &str, session: &str) -> reqwest::RequestBuilder {
    app.client(key, Method::POST, &format!("/sessions/{session}/cancel"))
}

async fn events(app: &TestApp, tenant: &Tenant, session: &str) -> anyhow::Result<Vec<Value>> {
    let (status, page) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/events?limit=100"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {page}");
    Ok(page["data"].as_array().cloned().unwrap_or_default())
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["type"].as_str()).collect()
}

#[tokio::test]
async fn a_cancel_from_another_request_stops_the_running_turn() -> R {
    let (model, app, tenant, agent) = setup().await?;
    let session = new_session(&app, &tenant, &agent).await?;
    let turn = start_slow_turn(&model, &app, &tenant, &agent, &session).await?;

    // Another project's key cannot see the session, let alone cancel its turn.
    let other = app.tenant().await?;
    let (status, body) = send(cancel(&app, &other.key, &session)).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");

    // The cancel is recorded and answered at once, while the model still works.
    let asked = Instant::now();
    let (status, body) = send(cancel(&app, &tenant.key, &session)).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(asked.elapsed() < SLOW_REPLY, "the cancel waited for the turn");
    assert_eq!(body["object"], "session");
    assert_eq!(body["id"], session.as_str());
    assert_eq!(body["runtime_status"], "running");

    // The Responses call that started the turn answers incomplete / cancelled, with no answer.
    let (status, response) = turn.await??;
    assert_eq!(status, StatusCode::OK, "{response}");
    assert_eq!(response["status"], "incomplete");
    assert_eq!(response["stop_reason"], "cancelled");
    assert!(response["output_text"].as_str().is_none_or(str::is_empty), "{response}");
    // The call in flight is paid for; no further model call was made.
    assert_eq!(model.requests().len(), 1);

    let (_, got) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}"))).await?;
    assert_eq!(got["runtime_status"], "idle");
    assert_eq!(got["stop_reason"], "cancelled");

    let log = events(&app, &tenant, &session).await?;
    assert_eq!(types(&log), ["turn.started", "message.user", "usage", "turn.ended"]);
    assert_eq!(log[3]["data"]["stop_reason"], "cancelled");

    // Nothing runs now: a cancel is refused; the session takes a new turn as usual.
    let (status, body) = send(cancel(&app, &tenant.key, &session)).await?;
    assert_error((status, &body), StatusCode::CONFLICT, "nothing_to_cancel");
    assert_eq!(body["error"]["runtime_status"], "idle");
    model.push(Reply::text("back again"));
    let (status, next) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "input": "again", "session_id": session})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{next}");
    assert_eq!(next["status"], "completed");
    assert_eq!(next["output_text"], "back again");
    Ok(())
}

#[tokio::test]
async fn a_cancel_with_no_running_turn_is_a_conflict_and_a_missing_session_404() -> R {
    let (_model, app, tenant, agent) = setup().await?;
    let session = new_session(&app, &tenant, &agent).await?;
    let (status, body) = send(cancel(&app, &tenant.key, &session)).await?;
    assert_error((status, &body), StatusCode::CONFLICT, "nothing_to_cancel");
    assert_eq!(body["error"]["runtime_status"], "idle");
    // The session is untouched.
    let (_, got) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}"))).await?;
    assert_eq!(got["runtime_status"], "idle");
    assert_eq!(got["stop_reason"], Value::Null);

    let missing = uuid::Uuid::new_v4().to_string();
    let (status, body) = send(cancel(&app, &tenant.key, &missing)).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    let (status, body) = send(cancel(&app, &tenant.key, "not-an-id")).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    // A deleted session is gone for cancel too.
    let (status, _) = send(app.client(&tenant.key, Method::DELETE, &format!("/sessions/{session}"))).await?;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = send(cancel(&app, &tenant.key, &session)).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    Ok(())
}

#[tokio::test]
async fn two_concurrent_cancels_have_one_effect() -> R {
    let (model, app, tenant, agent) = setup().await?;
    let session = new_session(&app, &tenant, &agent).await?;
    let turn = start_slow_turn(&model, &app, &tenant, &agent, &session).await?;

    let (first, second) =
        tokio::join!(send(cancel(&app, &tenant.key, &session)), send(cancel(&app, &tenant.key, &session)));
    // Both land while the turn holds the session: both are recorded, as one cancel.
    for (status, body) in [first?, second?] {
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["runtime_status"], "running");
    }

    let (status, response) = turn.await??;
    assert_eq!(status, StatusCode::OK, "{response}");
    assert_eq!(response["status"], "incomplete");
    assert_eq!(response["stop_reason"], "cancelled");
    assert_eq!(model.requests().len(), 1);
    let log = events(&app, &tenant, &session).await?;
    let ended: Vec<&Value> = log.iter().filter(|e| e["type"] == "turn.ended").collect();
    assert_eq!(ended.len(), 1, "{log:?}");
    assert_eq!(ended[0]["data"]["stop_reason"], "cancelled");
    let (_, got) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}"))).await?;
    assert_eq!(
        (got["runtime_status"].clone(), got["stop_reason"].clone()),
        (json!("idle"), json!("cancelled"))
    );
    Ok(())
}

#[tokio::test]
async fn a_cancel_racing_the_turns_own_end_leaves_one_consistent_final_state() -> R {
    let (model, app, tenant, agent) = setup().await?;
    for round in 0..3 {
        let session = new_session(&app, &tenant, &agent).await?;
        model.push(Reply::text("quick"));
        let request = app
            .client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "input": "hi", "session_id": session}));
        let turn = tokio::spawn(send(request));
        // Cancels keep arriving while the turn runs and after it ended.
        let mut answers = Vec::new();
        while !turn.is_finished() {
            answers.push(send(cancel(&app, &tenant.key, &session)).await?);
        }
        answers.push(send(cancel(&app, &tenant.key, &session)).await?);
        let (status, response) = turn.await??;
        assert_eq!(status, StatusCode::OK, "{response}");
        for (status, body) in &answers {
            assert!(
                *status == StatusCode::OK || error_code_is(body, "nothing_to_cancel"),
                "round {round}: {status} {body}"
            );
        }
        // The last cancel came after the end: nothing left to cancel.
        let (status, last) = answers.last().cloned().unwrap_or_default();
        assert_error((status, &last), StatusCode::CONFLICT, "nothing_to_cancel");

        // Whichever won, the response, the log and the session tell the same story, once.
        let log = events(&app, &tenant, &session).await?;
        let ended: Vec<&Value> = log.iter().filter(|e| e["type"] == "turn.ended").collect();
        assert_eq!(ended.len(), 1, "round {round}: {log:?}");
        let (_, got) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}"))).await?;
        assert_eq!(got["runtime_status"], "idle");
        assert_eq!(got["stop_reason"], ended[0]["data"]["stop_reason"]);
        match got["stop_reason"].as_str() {
            Some("end_turn") => {
                assert_eq!(
                    (response["status"].as_str(), response["output_text"].as_str()),
                    (Some("completed"), Some("quick"))
                );
            }
            Some("cancelled") => {
                assert_eq!(
                    (response["status"].as_str(), response["stop_reason"].as_str()),
                    (Some("incomplete"), Some("cancelled"))
                );
            }
            other => anyhow::bail!("round {round}: unexpected stop_reason {other:?}"),
        }
    }
    Ok(())
}

fn error_code_is(body: &Value, code: &str) -> bool {
    body["error"]["code"] == code
}
