//! Background runs end to end over HTTP and the real `runs` queue: `background: true` answers
//! 202 with a queued `agent_run`, the in-process `run-execution` job starts it once a slot of
//! its tenant is free and runs its turn (across invocations when it outlasts one), and the run
//! ends exactly once, whatever races it.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use agentplane_engine::background::BackgroundConfig;
use agentplane_tests::model::{Gate, Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

fn config(max: u32, invocation: Duration) -> BackgroundConfig {
    BackgroundConfig {
        max_concurrent_per_tenant: max,
        invocation_budget: invocation,
        wait_s: 1,
        ..BackgroundConfig::default()
    }
}

async fn setup(
    background: BackgroundConfig,
    agent_config: Value,
) -> anyhow::Result<(ScriptedModel, TestApp, Tenant, String)> {
    setup_patient(background, agent_config, None).await
}

/// `setup`, with the model calls given `call_timeout` (a test that holds them) when set.
async fn setup_patient(
    background: BackgroundConfig,
    agent_config: Value,
    call_timeout: Option<Duration>,
) -> anyhow::Result<(ScriptedModel, TestApp, Tenant, String)> {
    let model = ScriptedModel::start().await?;
    let base_url = model.base_url.clone();
    let app = TestApp::spawn_with_model_and(&model, |app| {
        let app = app.with_background(background);
        match call_timeout {
            Some(call_timeout) => app.with_model(agentplane_engine::ModelConfig {
                base_url,
                api_key: Some(agentplane_tests::MODEL_KEY.into()),
                call_timeout,
                max_retries: 0,
                initial_backoff: Duration::from_millis(20),
            }),
            None => app,
        }
    })
    .await?;
    let tenant = app.tenant().await?;
    let mut config = json!({"execution": {"background_enabled": true}});
    if let (Some(target), Some(extra)) = (config.as_object_mut(), agent_config.as_object()) {
        for (k, v) in extra {
            target.insert(k.clone(), v.clone());
        }
    }
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "worker", "model": "gpt-4o-mini", "tools": ["add"], "config": config}),
        )
        .await?;
    Ok((model, app, tenant, agent))
}

async fn submit(app: &TestApp, tenant: &Tenant, agent: &str, input: &str) -> anyhow::Result<Value> {
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "input": input, "background": true})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::ACCEPTED, "{status} {body}");
    Ok(body)
}

async fn run(app: &TestApp, tenant: &Tenant, id: &str) -> anyhow::Result<Value> {
    let (status, body) = send(app.client(&tenant.key, Method::GET, &format!("/runs/{id}"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    Ok(body)
}

async fn until_status(app: &TestApp, tenant: &Tenant, id: &str, wanted: &[&str]) -> anyhow::Result<Value> {
    let started = Instant::now();
    loop {
        let body = run(app, tenant, id).await?;
        if wanted.iter().any(|w| body["status"] == *w) {
            return Ok(body);
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(60),
            "the run never reached {wanted:?}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn events(app: &TestApp, tenant: &Tenant, session: &str) -> anyhow::Result<Vec<Value>> {
    let (status, page) =
        send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}/events?limit=100"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {page}");
    Ok(page["data"].as_array().cloned().unwrap_or_default())
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

#[tokio::test]
async fn a_background_turn_is_queued_then_runs_to_succeeded() -> R {
    let (model, app, tenant, agent) = setup(config(10, Duration::from_secs(60)), json!({})).await?;
    model.push(Reply::text("done in the background"));
    let queued = submit(&app, &tenant, &agent, "work").await?;
    assert_eq!(queued["object"], "agent_run");
    assert_eq!(queued["status"], "queued");
    let id = str_field(&queued, "id")?;
    assert!(id.starts_with("run_") && id.len() == 28, "{id}");
    assert_eq!(queued["agent_id"], agent.as_str());
    assert!(queued["created_at"].as_i64().is_some());
    let session = str_field(&queued, "session_id")?;

    let done = until_status(&app, &tenant, &id, &["succeeded", "failed"]).await?;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["output_text"], "done in the background");
    assert_eq!(done["stop_reason"], "end_turn");
    assert_eq!(done["usage"]["total_tokens"], 15);
    assert!(done["started_at"].as_i64().is_some() && done["ended_at"].as_i64().is_some());
    // The session's log holds the run's turn, under the run's turn id.
    let log = events(&app, &tenant, &session).await?;
    assert_eq!(count(&log, "turn.ended"), 1);
    assert!(log.iter().all(|e| e["turn_id"].is_null() || e["turn_id"] == done["turn_id"]), "{log:?}");

    // Lists: by session and by status; another session's filter finds nothing.
    let (_, page) =
        send(app.client(&tenant.key, Method::GET, &format!("/runs?session_id={session}"))).await?;
    assert_eq!(page["data"].as_array().map(Vec::len), Some(1), "{page}");
    let (_, page) = send(app.client(&tenant.key, Method::GET, "/runs?status=queued")).await?;
    assert_eq!(page["data"].as_array().map(Vec::len), Some(0), "{page}");
    let (_, page) = send(app.client(&tenant.key, Method::GET, "/runs?status=succeeded")).await?;
    assert_eq!(page["data"][0]["id"], id.as_str());
    let (status, body) = send(app.client(&tenant.key, Method::GET, "/runs?status=cancelled")).await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");

    // Cancelling an ended run changes nothing.
    let (status, body) = send(app.client(&tenant.key, Method::POST, &format!("/runs/{id}/cancel"))).await?;
    assert_error((status, &body), StatusCode::CONFLICT, "run_not_active");
    assert_eq!(body["error"]["run_status"], "succeeded");

    // Another project's key sees no such run.
    let other = app.tenant().await?;
    let (status, body) = send(app.client(&other.key, Method::GET, &format!("/runs/{id}"))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "run_not_found");
    let (status, body) = send(app.client(&other.key, Method::POST, &format!("/runs/{id}/cancel"))).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "run_not_found");
    let (_, page) = send(app.client(&other.key, Method::GET, "/runs")).await?;
    assert_eq!(page["data"].as_array().map(Vec::len), Some(0));
    let (status, body) = send(app.client(&tenant.key, Method::GET, "/runs/run_123")).await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "run_not_found");
    Ok(())
}

#[tokio::test]
async fn background_is_refused_where_the_agent_has_it_off_and_validated() -> R {
    let (_model, app, tenant, _) = setup(config(10, Duration::from_secs(60)), json!({})).await?;
    let off = app.create_agent(&tenant.key, json!({"name": "sync-only", "model": "gpt-4o-mini"})).await?;
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": off, "input": "x", "background": true})),
    )
    .await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "background_not_enabled");
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": off, "input": "x", "background": "yes"})),
    )
    .await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    let (_, page) = send(app.client(&tenant.key, Method::GET, "/runs")).await?;
    assert_eq!(page["data"].as_array().map(Vec::len), Some(0), "nothing was queued: {page}");
    Ok(())
}

#[tokio::test]
async fn twenty_five_runs_of_one_tenant_never_run_more_than_ten_at_once() -> R {
    let (model, app, tenant, agent) =
        setup_patient(config(10, Duration::from_secs(60)), json!({}), Some(Duration::from_secs(60))).await?;
    // As Lambda would, several consumers take batches at once (each batch is at most ten), so
    // only the slots hold the tenant to ten.
    for _ in 0..3 {
        tokio::spawn(agentplane_api::jobs::consume_runs_forever(app.app.clone()));
    }
    // Every model call is held at the gate until ten are in flight: the first wave fills all ten
    // slots however slowly the 25 arrive, and the other fifteen keep asking for a slot meanwhile.
    let gate = Gate::default();
    for _ in 0..25 {
        model.push(Reply::Gated(gate.clone()));
    }
    let inputs: Vec<String> = (0..25).map(|i| format!("job {i}")).collect();
    let submitted =
        futures_util::future::join_all(inputs.iter().map(|i| submit(&app, &tenant, &agent, i))).await;
    let ids: Vec<String> =
        submitted.into_iter().map(|b| b.and_then(|b| str_field(&b, "id"))).collect::<Result<_, _>>()?;
    let started = Instant::now();
    while model.in_flight() < 10 {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(60),
            "{} model calls at once",
            model.in_flight()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, page) = send(app.client(&tenant.key, Method::GET, "/runs?limit=100")).await?;
    let running = page["data"].as_array().into_iter().flatten().filter(|r| r["status"] == "running").count();
    assert_eq!(running, 10, "{page}");
    // Held a little longer, so the others come back for a slot (every `wait_s`) while all ten
    // are taken. The length only makes a broken cap likelier to show; it cannot fail a right one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    gate.open();
    loop {
        let (status, page) = send(app.client(&tenant.key, Method::GET, "/runs?limit=100")).await?;
        anyhow::ensure!(status == StatusCode::OK, "{status} {page}");
        let runs = page["data"].as_array().cloned().unwrap_or_default();
        let ended = runs.iter().filter(|r| r["status"] == "succeeded").count();
        if ended == 25 {
            break;
        }
        assert!(runs.iter().all(|r| r["status"] != "failed"), "{page}");
        anyhow::ensure!(started.elapsed() < Duration::from_secs(90), "runs did not all end: {page}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Counted where the calls land, not sampled: the cap was reached and never passed.
    assert_eq!(model.max_in_flight(), 10, "model calls at once");
    assert_eq!(model.requests().len(), 25);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 25);
    // Every slot was given back.
    let key = agentplane_domain::tenant::TenantKey::Project(tenant.project_id.parse()?).key();
    assert!(app.store.agent_runs().slots(&key).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn a_queued_run_waits_for_a_slot_and_can_be_cancelled_there() -> R {
    let (model, app, tenant, agent) = setup(config(1, Duration::from_secs(60)), json!({})).await?;
    model.push(Reply::Hang(Duration::from_millis(2500)));
    model.push(Reply::text("second"));
    let first = str_field(&submit(&app, &tenant, &agent, "first").await?, "id")?;
    until_status(&app, &tenant, &first, &["running"]).await?;
    let second = str_field(&submit(&app, &tenant, &agent, "second").await?, "id")?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(run(&app, &tenant, &second).await?["status"], "queued", "the one slot is held");
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, &format!("/runs/{second}/cancel"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "canceled");
    assert_eq!(until_status(&app, &tenant, &first, &["succeeded"]).await?["output_text"], "late");
    // The cancelled run's message comes back and does nothing: one model call in all.
    app.drained().await?;
    assert_eq!(run(&app, &tenant, &second).await?["status"], "canceled");
    assert_eq!(model.requests().len(), 1);
    Ok(())
}

#[tokio::test]
async fn cancel_racing_completion_ends_the_run_once() -> R {
    let (model, app, tenant, agent) = setup(config(10, Duration::from_secs(60)), json!({})).await?;
    for delay in [0u64, 100, 200, 300, 400] {
        model.push(Reply::Hang(Duration::from_millis(200)));
        let queued = submit(&app, &tenant, &agent, "race").await?;
        let id = str_field(&queued, "id")?;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let (status, body) =
            send(app.client(&tenant.key, Method::POST, &format!("/runs/{id}/cancel"))).await?;
        assert!(status == StatusCode::OK || status == StatusCode::CONFLICT, "{status} {body}");
        let end = until_status(&app, &tenant, &id, &["succeeded", "canceled", "failed"]).await?;
        assert!(end["status"] == "succeeded" || end["status"] == "canceled", "{end}");
        tokio::time::sleep(Duration::from_millis(400)).await;
        let again = run(&app, &tenant, &id).await?;
        assert_eq!(again["status"], end["status"], "the ending never changes");
        let log = events(&app, &tenant, &str_field(&queued, "session_id")?).await?;
        assert!(count(&log, "turn.ended") <= 1, "{log:?}");
        if end["status"] == "succeeded" {
            assert_eq!(count(&log, "turn.ended"), 1);
        }
    }
    Ok(())
}

#[tokio::test]
async fn the_same_start_message_delivered_twice_runs_once() -> R {
    let (model, app, tenant, agent) = setup(config(10, Duration::from_secs(60)), json!({})).await?;
    model.push(Reply::Hang(Duration::from_millis(300)));
    model.push(Reply::text("a second run of the same message"));
    let queued = submit(&app, &tenant, &agent, "once").await?;
    let id = str_field(&queued, "id")?;
    let message = agentplane_domain::agent_run::StartRun {
        project_id: tenant.project_id.parse()?,
        run_id: id.parse()?,
    };
    for _ in 0..3 {
        app.app.engine().enqueue_run(&message, 0).await?;
    }
    let end = until_status(&app, &tenant, &id, &["succeeded", "failed"]).await?;
    assert_eq!(end["status"], "succeeded");
    app.drained().await?;
    assert_eq!(model.requests().len(), 1, "one execution");
    let log = events(&app, &tenant, &str_field(&queued, "session_id")?).await?;
    assert_eq!(count(&log, "turn.started"), 1);
    assert_eq!(count(&log, "turn.ended"), 1);
    Ok(())
}

#[tokio::test]
async fn a_run_longer_than_one_invocation_hands_over_and_finishes() -> R {
    // Every step after an invocation's first hands the turn over to a continuation.
    let (model, app, tenant, agent) = setup(config(10, Duration::from_millis(1)), json!({})).await?;
    for i in 0..3 {
        model.push(Reply::tool(&format!("c{i}"), "add", &json!({"a": i, "b": 1})));
    }
    model.push(Reply::text("sum done"));
    let queued = submit(&app, &tenant, &agent, "add three times").await?;
    let id = str_field(&queued, "id")?;
    let end = until_status(&app, &tenant, &id, &["succeeded", "failed"]).await?;
    assert_eq!(end["status"], "succeeded", "{end}");
    assert_eq!(end["output_text"], "sum done");
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    // One unbroken turn: the last call saw every earlier call and result.
    let last = requests[3]["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(last.iter().filter(|m| m["role"] == "tool").count(), 3, "{last:?}");
    let log = events(&app, &tenant, &str_field(&queued, "session_id")?).await?;
    assert_eq!(count(&log, "turn.started"), 1);
    assert_eq!(count(&log, "turn.ended"), 1);
    assert_eq!(count(&log, "tool.result"), 3);
    assert_eq!(end["usage"]["total_tokens"], 3 * 19 + 15, "{end}");
    Ok(())
}

#[tokio::test]
async fn a_run_that_waits_for_an_approval_is_requires_action_then_carries_on() -> R {
    let hitl = json!({"humanInTheLoop": {"tool_approvals": ["add"]}});
    let (model, app, tenant, agent) = setup(config(10, Duration::from_secs(60)), hitl).await?;
    model.push(Reply::tool("c1", "add", &json!({"a": 2, "b": 3})));
    model.push(Reply::text("five"));
    let queued = submit(&app, &tenant, &agent, "add").await?;
    let id = str_field(&queued, "id")?;
    let waiting = until_status(&app, &tenant, &id, &["requires_action", "failed"]).await?;
    assert_eq!(waiting["status"], "requires_action", "{waiting}");
    let action = waiting["pending_action_ids"][0].as_str().map(str::to_owned).unwrap_or_default();
    assert!(action.starts_with("act_"), "{waiting}");
    let session = str_field(&queued, "session_id")?;
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{session}/actions/{action}"))
            .json(&json!({"decision": "approve"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let end = until_status(&app, &tenant, &id, &["succeeded", "failed"]).await?;
    assert_eq!(end["status"], "succeeded", "{end}");
    assert_eq!(end["output_text"], "five");
    assert_eq!(end["pending_action_ids"], json!([]));
    // No callback was asked for, and the agent has no default one.
    assert_eq!(end["callback"], Value::Null);
    Ok(())
}

#[tokio::test]
async fn the_end_of_a_run_is_recorded_for_its_callback() -> R {
    let execution = json!({"execution": {"background_enabled": true, "default_callback_url": "https://agent.example/default"}});
    let (model, app, tenant, agent) = setup(config(10, Duration::from_secs(60)), execution).await?;
    model.push(Reply::text("one"));
    model.push(Reply::Status(400));
    let (status, body) = send(app.client(&tenant.key, Method::POST, "/responses").json(
        &json!({"agent": agent, "input": "x", "background": true, "callback_url": "https://caller.example/cb"}),
    ))
    .await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["callback_url"], "https://caller.example/cb", "{body}");
    let end = until_status(&app, &tenant, &str_field(&body, "id")?, &["succeeded"]).await?;
    assert_eq!(end["callback_url"], "https://caller.example/cb");
    assert_eq!(end["callback"]["url"], "https://caller.example/cb");
    assert_eq!(end["callback"]["event_type"], "agent_run.succeeded");
    // Without one on the request, the agent's default is told; a failed run says so.
    let failed = submit(&app, &tenant, &agent, "y").await?;
    let end = until_status(&app, &tenant, &str_field(&failed, "id")?, &["failed", "succeeded"]).await?;
    assert_eq!(end["status"], "failed", "{end}");
    assert!(end["error"]["code"].as_str().is_some(), "{end}");
    assert_eq!(end["callback"]["url"], "https://agent.example/default");
    assert_eq!(end["callback"]["event_type"], "agent_run.failed");
    let (status, body) = send(app.client(&tenant.key, Method::POST, "/responses").json(
        &json!({"agent": agent, "input": "x", "background": true, "callback_url": "file:///etc/passwd"}),
    ))
    .await?;
    assert_error((status, &body), StatusCode::BAD_REQUEST, "invalid_request_error");
    Ok(())
}

#[tokio::test]
async fn cancelling_a_waiting_run_ends_its_turn() -> R {
    let hitl = json!({"humanInTheLoop": {"tool_approvals": ["add"]}});
    let (model, app, tenant, agent) = setup(config(10, Duration::from_secs(60)), hitl).await?;
    model.push(Reply::tool("c1", "add", &json!({"a": 2, "b": 3})));
    let queued = submit(&app, &tenant, &agent, "add").await?;
    let id = str_field(&queued, "id")?;
    until_status(&app, &tenant, &id, &["requires_action"]).await?;
    let (status, body) = send(app.client(&tenant.key, Method::POST, &format!("/runs/{id}/cancel"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "canceled");
    let session = str_field(&queued, "session_id")?;
    let (_, s) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{session}"))).await?;
    assert_eq!(s["runtime_status"], "idle");
    assert_eq!(s["stop_reason"], "cancelled");
    Ok(())
}

#[tokio::test]
async fn a_crashed_holders_slot_comes_back_when_its_lease_runs_out() -> R {
    let (model, app, tenant, agent) = setup(config(1, Duration::from_secs(60)), json!({})).await?;
    // A run that took the tenant's one slot and then died: its lease is never renewed.
    let project: agentplane_domain::ProjectId = tenant.project_id.parse()?;
    let now = agentplane_api::edge::now();
    let dead = agentplane_domain::agent_run::AgentRun {
        id: agentplane_domain::agent_run::RunId::from_random([7; 12]),
        project_id: project,
        session_id: agentplane_domain::SessionId::from_random([7; 16]),
        agent_id: agent.parse()?,
        channel: agentplane_domain::agent::Channel::Draft,
        version: None,
        status: agentplane_domain::agent_run::RunStatus::Queued,
        input: "crashed".into(),
        image_files: Vec::new(),
        max_duration_ms: 60_000,
        callback_url: None,
        created_at: now,
        started_at: None,
        ended_at: None,
        stop_reason: None,
        output_text: None,
        error: None,
        usage: Default::default(),
        cost_usd: 0.0,
        cancel_requested: false,
        pending_action_ids: Vec::new(),
        callback: None,
        lease_until: None,
        expires_at: now.plus_seconds(86_400),
    };
    let announced =
        agentplane_engine::background::run_event(&dead).ok_or_else(|| anyhow::anyhow!("no event"))?;
    app.store.agent_runs().create(&dead, &announced).await?;
    let key = agentplane_domain::tenant::TenantKey::Project(project).key();
    let lease = now.plus_millis(3000);
    let taken = app
        .store
        .agent_runs()
        .start(&dead, agentplane_domain::agent_run::RunStatus::Queued, &key, 1, now, lease)
        .await?;
    assert!(taken.is_ok(), "{taken:?}");
    model.push(Reply::text("after the lease"));
    let waiting = str_field(&submit(&app, &tenant, &agent, "waits").await?, "id")?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(run(&app, &tenant, &waiting).await?["status"], "queued", "the dead run's lease still holds");
    let end = until_status(&app, &tenant, &waiting, &["succeeded", "failed"]).await?;
    assert_eq!(end["status"], "succeeded", "{end}");
    assert!(end["started_at"].as_i64().unwrap_or(0) * 1000 >= lease.unix_millis() - 1000, "{end}");
    Ok(())
}
