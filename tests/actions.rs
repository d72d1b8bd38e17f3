//! The actions of paused turns over HTTP (`GET …/sessions/{id}/actions[?status=]`,
//! `GET …/actions/{act_id}`, `POST …/actions/{act_id}` to answer), and the store's moves behind
//! them. No turn pauses in these tests: sessions are created through the API and their pending
//! actions written to the store as a pausing turn writes them.

use agentplane_domain::action::{Action, ActionId, ActionStatus, ActionType, expires_at};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use agentplane_store::dynamo::actions::put_new;
use agentplane_tests::{Tenant, TestApp, assert_error, send, str_field};
use aws_sdk_dynamodb::types::TransactWriteItem;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn new_session(app: &TestApp, tenant: &Tenant) -> anyhow::Result<String> {
    let (status, body) = send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({}))).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{status} {body}");
    str_field(&body, "id")
}

fn random_id() -> ActionId {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let mut id = [0u8; 12];
    id.copy_from_slice(&bytes[..12]);
    ActionId::from_random(id)
}

/// A pending action of `kind` in the turn `turn_id`, created at `created_at` and expiring
/// `timeout_minutes` later (0: never).
fn action(
    tenant: &Tenant,
    session: &str,
    turn_id: &str,
    kind: ActionType,
    created_at: Timestamp,
    timeout_minutes: u32,
) -> anyhow::Result<Action> {
    let (tool, args, question) = match kind {
        ActionType::Approval => ("delete_repo", json!({"Repo Name": "x", "dryRun": false}), None),
        ActionType::Question => {
            ("ask_user", json!({"question": "Which city?"}), Some("Which city?".to_owned()))
        }
        ActionType::ClientTool => ("get_location", json!({"precision": "city"}), None),
    };
    Ok(Action {
        id: random_id(),
        project_id: tenant.project_id.parse::<ProjectId>().map_err(|e| anyhow::anyhow!("{e:?}"))?,
        session_id: session.parse::<SessionId>().map_err(|e| anyhow::anyhow!("{e:?}"))?,
        turn_id: turn_id.to_owned(),
        pause_version: 1,
        call_id: format!("call_{}", uuid::Uuid::new_v4().simple()),
        kind,
        status: ActionStatus::Pending,
        tool: tool.to_owned(),
        args,
        question,
        answer: None,
        created_at,
        expires_at: expires_at(created_at, timeout_minutes),
        settled_at: None,
        answer_key_ids: None,
    })
}

/// Writes a new action as a pausing turn does (a transaction's conditional put).
async fn insert(app: &TestApp, action: &Action) -> R {
    let put = put_new(&app.store, action)?;
    app.store
        .dynamo
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().put(put).build())
        .send()
        .await?;
    Ok(())
}

fn now() -> Timestamp {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    Timestamp::from_unix_millis(ms)
}

fn path(session: &str, action: &Action) -> String {
    format!("/sessions/{session}/actions/{}", action.id)
}

async fn pending_one(app: &TestApp, tenant: &Tenant, kind: ActionType) -> anyhow::Result<(String, Action)> {
    let session = new_session(app, tenant).await?;
    let a = action(tenant, &session, "turn_1", kind, now(), 60)?;
    insert(app, &a).await?;
    Ok((session, a))
}

#[tokio::test]
async fn a_sessions_actions_are_listed_newest_first_and_filtered_by_status() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let session = new_session(&app, &tenant).await?;
    let t0 = now();
    let mut actions = Vec::new();
    for (i, kind) in
        [ActionType::Approval, ActionType::Question, ActionType::ClientTool].into_iter().enumerate()
    {
        let a = action(&tenant, &session, "turn_1", kind, t0.plus_millis(i as i64 * 1_000), 0)?;
        insert(&app, &a).await?;
        actions.push(a);
    }
    // Another session's action never shows.
    let other = new_session(&app, &tenant).await?;
    insert(&app, &action(&tenant, &other, "turn_9", ActionType::Approval, t0, 0)?).await?;
    app.store.actions().settle(&actions[0], ActionStatus::Resolved, None, now()).await?;

    let list = format!("/sessions/{session}/actions");
    let (status, body) = send(app.client(&tenant.key, Method::GET, &list)).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["object"], "list");
    let ids: Vec<&str> =
        body["data"].as_array().into_iter().flatten().filter_map(|a| a["id"].as_str()).collect();
    let newest_first: Vec<String> = actions.iter().rev().map(|a| a.id.to_string()).collect();
    assert_eq!(ids, newest_first);
    assert_eq!(body["has_more"], false);
    assert_eq!(body["first_id"], newest_first[0]);
    assert_eq!(body["last_id"], newest_first[2]);
    // The object as the client API shows it.
    let question = &body["data"][1];
    assert_eq!(question["object"], "action");
    assert_eq!(question["session_id"], session);
    assert_eq!(question["turn_id"], "turn_1");
    assert_eq!(question["type"], "question");
    assert_eq!(question["status"], "pending");
    assert_eq!(question["tool"], "ask_user");
    assert_eq!(question["question"], "Which city?");
    assert_eq!(question["answer"], Value::Null);
    assert_eq!(question["expires_at"], Value::Null);
    assert_eq!(question["resolved_at"], Value::Null);
    assert_eq!(question["created_at"], actions[1].created_at.unix_seconds());
    let approval = &body["data"][2];
    assert_eq!(approval["args"], json!({"Repo Name": "x", "dryRun": false}), "args as stored");
    assert_eq!(approval["question"], Value::Null);
    assert_eq!(approval["status"], "resolved");
    assert!(approval["resolved_at"].is_i64(), "{approval}");

    let (_, pending) = send(app.client(&tenant.key, Method::GET, &format!("{list}?status=pending"))).await?;
    let ids: Vec<&str> =
        pending["data"].as_array().into_iter().flatten().filter_map(|a| a["id"].as_str()).collect();
    assert_eq!(ids, newest_first[..2].iter().map(String::as_str).collect::<Vec<_>>());
    let (_, resolved) =
        send(app.client(&tenant.key, Method::GET, &format!("{list}?status=resolved"))).await?;
    assert_eq!(resolved["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(resolved["data"][0]["id"], newest_first[2]);
    let (_, expired) = send(app.client(&tenant.key, Method::GET, &format!("{list}?status=expired"))).await?;
    assert_eq!(expired["data"], json!([]));

    // Keyset pages, both orders.
    let (_, first) = send(app.client(&tenant.key, Method::GET, &format!("{list}?limit=2"))).await?;
    assert_eq!(first["has_more"], true);
    assert_eq!(first["last_id"], newest_first[1]);
    let after = format!("{list}?limit=2&after={}", newest_first[1]);
    let (_, second) = send(app.client(&tenant.key, Method::GET, &after)).await?;
    assert_eq!(second["has_more"], false);
    assert_eq!(second["data"][0]["id"], newest_first[2]);
    let (_, asc) = send(app.client(&tenant.key, Method::GET, &format!("{list}?order=asc&limit=1"))).await?;
    assert_eq!(asc["data"][0]["id"], newest_first[2]);

    // Bad parameters.
    for (query, param) in [("status=done", "status"), ("status=Pending", "status"), ("limit=0", "limit")] {
        let (status, body) = send(app.client(&tenant.key, Method::GET, &format!("{list}?{query}"))).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(body["error"]["param"], param, "{query}: {body}");
    }
    for cursor in ["act_zz", "nope", &random_id().to_string()] {
        let (status, body) =
            send(app.client(&tenant.key, Method::GET, &format!("{list}?after={cursor}"))).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "cursor_not_found");
    }
    Ok(())
}

#[tokio::test]
async fn an_action_is_read_by_its_id() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let (session, a) = pending_one(&app, &tenant, ActionType::ClientTool).await?;
    let (status, body) = send(app.client(&tenant.key, Method::GET, &path(&session, &a))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["id"], a.id.to_string());
    assert_eq!(body["type"], "client_tool");
    assert_eq!(body["tool"], "get_location");
    assert_eq!(body["args"], json!({"precision": "city"}));
    let expires = a.expires_at.map(Timestamp::unix_seconds);
    assert_eq!(body["expires_at"], json!(expires));
    Ok(())
}

/// Answers `action` with `answer` and checks the 200, what GET shows and what is stored.
async fn answers_as_given(
    app: &TestApp,
    tenant: &Tenant,
    kind: ActionType,
    answer: Value,
    shown: Value,
) -> R {
    let (session, a) = pending_one(app, tenant, kind).await?;
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, &path(&session, &a)).json(&answer)).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "resolved");
    assert_eq!(body["answer"], shown);
    assert!(body["resolved_at"].is_i64(), "{body}");
    let (_, got) = send(app.client(&tenant.key, Method::GET, &path(&session, &a))).await?;
    assert_eq!(got, body, "GET shows the answer as the POST did");
    let stored = app.store.actions().get(&a.project_id, &a.session_id, &a.id).await?;
    assert_eq!(stored.status, ActionStatus::Resolved);
    assert!(stored.settled_at.is_some());
    // It left the due-work index with `pending`.
    let due = app.store.actions().due(now().plus_millis(10 * 86_400_000), 100).await?;
    assert!(due.iter().all(|d| d.id != a.id), "a resolved action is never due");
    Ok(())
}

#[tokio::test]
async fn each_type_takes_its_answer_and_keeps_it_exactly() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    answers_as_given(
        &app,
        &tenant,
        ActionType::Approval,
        json!({"decision": "deny", "reason": "not on Fridays"}),
        json!({"decision": "deny", "reason": "not on Fridays"}),
    )
    .await?;
    answers_as_given(
        &app,
        &tenant,
        ActionType::Approval,
        json!({"decision": "approve"}),
        json!({"decision": "approve", "reason": null}),
    )
    .await?;
    let answers = json!({"Some Key": 1, "camelCase": true, "nested_list": [{"A b": null}, 2.5, "x"]});
    answers_as_given(
        &app,
        &tenant,
        ActionType::Question,
        json!({"answers": answers}),
        json!({"answers": answers}),
    )
    .await?;
    let output = json!([1, {"X-Forwarded": "z", "lat": 48.85}]);
    answers_as_given(
        &app,
        &tenant,
        ActionType::ClientTool,
        json!({"output": output}),
        json!({"output": output}),
    )
    .await?;
    // A client tool's output may be any JSON, `null` included.
    answers_as_given(&app, &tenant, ActionType::ClientTool, json!({"output": null}), json!({"output": null}))
        .await?;
    Ok(())
}

#[tokio::test]
async fn an_answer_of_the_wrong_shape_is_refused_by_field_and_changes_nothing() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let cases = [
        (ActionType::Approval, json!({}), "decision"),
        (ActionType::Approval, json!({"decision": "maybe"}), "decision"),
        (ActionType::Approval, json!({"decision": true}), "decision"),
        (ActionType::Approval, json!({"decision": "approve", "reason": 5}), "reason"),
        (ActionType::Approval, json!({"decision": "deny", "reason": "x".repeat(2_001)}), "reason"),
        (ActionType::Approval, json!({"decision": "approve", "answers": {}}), "answers"),
        (ActionType::Question, json!({}), "answers"),
        (ActionType::Question, json!({"answers": null}), "answers"),
        (ActionType::Question, json!({"output": 1}), "output"),
        (ActionType::ClientTool, json!({}), "output"),
        (ActionType::ClientTool, json!({"output": "x".repeat(70_000)}), "output"),
        (ActionType::ClientTool, json!({"output": 1, "decision": "approve"}), "decision"),
    ];
    for (kind, answer, param) in cases {
        let (session, a) = pending_one(&app, &tenant, kind).await?;
        let (status, body) =
            send(app.client(&tenant.key, Method::POST, &path(&session, &a)).json(&answer)).await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(body["error"]["param"], param, "{kind:?}: {body}");
        let stored = app.store.actions().get(&a.project_id, &a.session_id, &a.id).await?;
        assert_eq!(stored.status, ActionStatus::Pending, "{kind:?} {answer}");
        assert_eq!(stored.answer, None);
    }
    // Not a JSON object at all.
    let (session, a) = pending_one(&app, &tenant, ActionType::Question).await?;
    for raw in ["[1]", "{", "\"answers\""] {
        let (status, body) = send(
            app.client(&tenant.key, Method::POST, &path(&session, &a))
                .header("content-type", "application/json")
                .body(raw),
        )
        .await?;
        assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_json");
    }
    Ok(())
}

#[tokio::test]
async fn of_fifty_concurrent_answers_exactly_one_wins() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let (session, a) = pending_one(&app, &tenant, ActionType::Question).await?;
    let url = path(&session, &a);
    let calls = (0..50).map(|i| {
        let request = app.client(&tenant.key, Method::POST, &url).json(&json!({"answers": {"n": i}}));
        send(request)
    });
    let results = futures_util::future::join_all(calls).await;
    let mut winners = Vec::new();
    let mut conflicts = 0;
    for result in results {
        let (status, body) = result?;
        match status {
            StatusCode::OK => winners.push(body["answer"]["answers"]["n"].clone()),
            StatusCode::CONFLICT => {
                assert_error((status, &body), StatusCode::CONFLICT, "action_not_pending");
                assert_eq!(body["error"]["action_status"], "resolved", "{body}");
                conflicts += 1;
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one answer wins");
    assert_eq!(conflicts, 49);
    // The stored answer is the winner's.
    let stored = app.store.actions().get(&a.project_id, &a.session_id, &a.id).await?;
    assert_eq!(
        stored.answer,
        Some(agentplane_domain::action::Answer::Question { answers: json!({"n": winners[0]}) })
    );
    // A later answer, too.
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, &url).json(&json!({"answers": 1}))).await?;
    assert_error((status, &body), StatusCode::CONFLICT, "action_not_pending");
    assert_eq!(body["error"]["action_status"], "resolved");
    Ok(())
}

#[tokio::test]
async fn a_late_answer_to_an_expired_or_cancelled_action_conflicts_with_its_status() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let session = new_session(&app, &tenant).await?;
    // Long past its one-minute expiry: due.
    let old = now().plus_millis(-3_600_000);
    let expiring = action(&tenant, &session, "turn_1", ActionType::Approval, old, 1)?;
    let never = action(&tenant, &session, "turn_1", ActionType::Question, old, 0)?;
    let later = action(&tenant, &session, "turn_1", ActionType::Question, now(), 60)?;
    for a in [&expiring, &never, &later] {
        insert(&app, a).await?;
    }
    let due = app.store.actions().due(now(), 10).await?;
    assert_eq!(due.iter().map(|a| &a.id).collect::<Vec<_>>(), vec![&expiring.id], "only what is due");
    let expired = app.store.actions().settle(&expiring, ActionStatus::Expired, None, now()).await?;
    assert_eq!(expired.status, ActionStatus::Expired);
    assert!(app.store.actions().due(now(), 10).await?.is_empty(), "an expired action is due no more");
    // Settling twice conflicts; settling what does not exist is not found.
    assert!(matches!(
        app.store.actions().settle(&expiring, ActionStatus::Cancelled, None, now()).await,
        Err(agentplane_store::StoreError::Conflict)
    ));
    let ghost = action(&tenant, &session, "turn_1", ActionType::Question, now(), 0)?;
    assert!(matches!(
        app.store.actions().settle(&ghost, ActionStatus::Cancelled, None, now()).await,
        Err(agentplane_store::StoreError::NotFound)
    ));

    let (status, body) = send(
        app.client(&tenant.key, Method::POST, &path(&session, &expiring))
            .json(&json!({"decision": "approve"})),
    )
    .await?;
    assert_error((status, &body), StatusCode::CONFLICT, "action_not_pending");
    assert_eq!(body["error"]["action_status"], "expired");

    // Past its expiry but not yet swept: the answer records the expiry and is refused.
    let overdue = action(&tenant, &session, "turn_3", ActionType::ClientTool, old, 1)?;
    insert(&app, &overdue).await?;
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, &path(&session, &overdue)).json(&json!({"output": 1})))
            .await?;
    assert_error((status, &body), StatusCode::CONFLICT, "action_not_pending");
    assert_eq!(body["error"]["action_status"], "expired");
    let (_, shown) = send(app.client(&tenant.key, Method::GET, &path(&session, &overdue))).await?;
    assert_eq!((shown["status"].clone(), shown["answer"].clone()), (json!("expired"), Value::Null));
    assert!(shown["resolved_at"].is_i64(), "{shown}");
    assert!(app.store.actions().due(now(), 10).await?.is_empty(), "recorded: due no more");
    // A wrong shape is still a 400, overdue or not.
    let overdue = action(&tenant, &session, "turn_3", ActionType::ClientTool, old, 1)?;
    insert(&app, &overdue).await?;
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, &path(&session, &overdue)).json(&json!({}))).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");

    // Cancelling the turn cancels its pending actions only; another turn's stay pending.
    let other_turn = action(&tenant, &session, "turn_2", ActionType::ClientTool, now(), 0)?;
    insert(&app, &other_turn).await?;
    let cancelled =
        app.store.actions().cancel_pending(&never.project_id, &never.session_id, "turn_1", now()).await?;
    let mut ids: Vec<&ActionId> = cancelled.iter().map(|a| &a.id).collect();
    ids.sort();
    let mut expected = vec![&never.id, &later.id];
    expected.sort();
    assert_eq!(ids, expected);
    assert!(cancelled.iter().all(|a| a.status == ActionStatus::Cancelled && a.settled_at.is_some()));
    let pending = app.store.actions().pending(&never.project_id, &never.session_id).await?;
    assert!(pending.iter().all(|a| a.turn_id != "turn_1"), "{pending:?}");
    assert!(pending.iter().any(|a| a.id == other_turn.id), "another turn's action stays pending");
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, &path(&session, &later)).json(&json!({"answers": "x"})))
            .await?;
    assert_error((status, &body), StatusCode::CONFLICT, "action_not_pending");
    assert_eq!(body["error"]["action_status"], "cancelled");
    let (_, shown) = send(app.client(&tenant.key, Method::GET, &path(&session, &later))).await?;
    assert_eq!(shown["status"], "cancelled");
    assert_eq!(shown["answer"], Value::Null);
    Ok(())
}

#[tokio::test]
async fn another_projects_key_finds_nothing_and_changes_nothing() -> R {
    let app = TestApp::spawn().await?;
    let owner = app.tenant().await?;
    let intruder = app.tenant().await?;
    let (session, a) = pending_one(&app, &owner, ActionType::Approval).await?;
    let (status, body) =
        send(app.client(&intruder.key, Method::GET, &format!("/sessions/{session}/actions"))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    let (status, body) = send(app.client(&intruder.key, Method::GET, &path(&session, &a))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    let (status, body) = send(
        app.client(&intruder.key, Method::POST, &path(&session, &a)).json(&json!({"decision": "approve"})),
    )
    .await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    // The intruder's own session does not reach the owner's action either.
    let own = new_session(&app, &intruder).await?;
    let (status, body) = send(
        app.client(&intruder.key, Method::POST, &format!("/sessions/{own}/actions/{}", a.id))
            .json(&json!({"decision": "approve"})),
    )
    .await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "action_not_found");
    let stored = app.store.actions().get(&a.project_id, &a.session_id, &a.id).await?;
    assert_eq!(stored.status, ActionStatus::Pending, "the owner's action is untouched");
    // No key at all.
    let (status, _) =
        send(app.request(Method::GET, &format!("/api/client/v1/sessions/{session}/actions"))).await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    Ok(())
}

#[tokio::test]
async fn malformed_and_unknown_ids_are_not_found() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let (session, a) = pending_one(&app, &tenant, ActionType::Approval).await?;
    let sibling = new_session(&app, &tenant).await?;
    let missing_session = SessionId::from_random([9; 16]).to_string();
    let cases = [
        (format!("/sessions/ses_nope/actions/{}", a.id), "session_not_found"),
        (format!("/sessions/{missing_session}/actions/{}", a.id), "session_not_found"),
        (format!("/sessions/{session}/actions/act_zz"), "action_not_found"),
        (format!("/sessions/{session}/actions/{}", a.id.as_str().to_uppercase()), "action_not_found"),
        (format!("/sessions/{session}/actions/run_{}", &a.id.as_str()[4..]), "action_not_found"),
        (format!("/sessions/{session}/actions/{}", random_id()), "action_not_found"),
        // The action of another session of the same project.
        (format!("/sessions/{sibling}/actions/{}", a.id), "action_not_found"),
    ];
    for (url, code) in &cases {
        let (status, body) = send(app.client(&tenant.key, Method::GET, url)).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, code);
        let (status, body) =
            send(app.client(&tenant.key, Method::POST, url).json(&json!({"decision": "approve"}))).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, code);
    }
    for url in ["/sessions/ses_nope/actions".to_owned(), format!("/sessions/{missing_session}/actions")] {
        let (status, body) = send(app.client(&tenant.key, Method::GET, &url)).await?;
        assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    }
    // A deleted session's actions are gone with it, and ended: nobody can answer them any more.
    let (status, _) = send(app.client(&tenant.key, Method::DELETE, &format!("/sessions/{session}"))).await?;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = send(app.client(&tenant.key, Method::GET, &path(&session, &a))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "session_not_found");
    let stored = app.store.actions().get(&a.project_id, &a.session_id, &a.id).await?;
    assert_eq!(stored.status, ActionStatus::Cancelled);
    assert!(stored.settled_at.is_some(), "{stored:?}");
    // The sweep finds nothing of it to expire and carry on, even past its expiry.
    let later = agentplane_api::edge::now().plus_millis(86_400_000);
    assert!(app.store.actions().due(later, 100).await?.iter().all(|d| d.session_id != a.session_id));
    Ok(())
}
