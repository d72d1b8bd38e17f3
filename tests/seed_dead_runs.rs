//! Seed 002 / issue 25: a background run whose executor dies is settled by the retention sweep,
//! never left `running`. The run carries a lease renewed while its executor works; once it
//! lapsed, one sweep pass fails the run with `executor_lost` (or ends it `canceled` when a cancel
//! waited for the dead executor), announces it as any end is (its callback recorded), and
//! releases the session the dead turn held. A second pass finds nothing; a run whose lease is
//! live is left alone.

use std::time::Duration;

use agentplane_api::jobs::sweep_once;
use agentplane_domain::agent_run::{RunId, SLOT_LEASE_MS, StartRun};
use agentplane_engine::background::BackgroundConfig;
use agentplane_tests::model::{Gate, Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::time::Instant;

type R = anyhow::Result<()>;

async fn run(app: &TestApp, tenant: &Tenant, id: &str) -> anyhow::Result<Value> {
    let (status, body) = send(app.client(&tenant.key, Method::GET, &format!("/runs/{id}"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    Ok(body)
}

async fn session(app: &TestApp, tenant: &Tenant, id: &str) -> anyhow::Result<Value> {
    let (status, body) = send(app.client(&tenant.key, Method::GET, &format!("/sessions/{id}"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {body}");
    Ok(body)
}

/// Queues a background run (nobody consumes the queue) and starts executing it in a task of
/// its own, its model call held at `gate`: once the run is `running` and its call in flight, the
/// task is aborted, as a crashed or timed-out invocation would end. Answers the run.
async fn dead_executor(
    app: &TestApp,
    tenant: &Tenant,
    agent: &str,
    model: &ScriptedModel,
    extra: Value,
) -> anyhow::Result<Value> {
    model.push(Reply::Gated(Gate::default()));
    let mut body = json!({"agent": agent, "input": "work", "background": true});
    if let (Value::Object(body), Value::Object(extra)) = (&mut body, extra) {
        body.extend(extra);
    }
    let (status, queued) = send(app.client(&tenant.key, Method::POST, "/responses").json(&body)).await?;
    anyhow::ensure!(status == StatusCode::ACCEPTED, "{status} {queued}");
    let id = str_field(&queued, "id")?;
    let message = StartRun { project_id: tenant.project_id.parse()?, run_id: id.parse::<RunId>()? };
    let engine = app.app.engine().clone();
    let in_flight = model.in_flight();
    let executor = tokio::spawn(async move {
        let config = BackgroundConfig::default();
        engine.execute_run(&message, &config, Instant::now() + Duration::from_secs(600)).await
    });
    let started = std::time::Instant::now();
    while model.in_flight() == in_flight {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(20), "the run's model call never came");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    executor.abort();
    let _ = executor.await;
    let body = run(app, tenant, &id).await?;
    anyhow::ensure!(body["status"] == "running", "{body}");
    Ok(body)
}

#[tokio::test]
async fn a_run_whose_executor_died_is_settled_once_by_the_sweep() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model_without_runs_consumer(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "bg", "model": "gpt-4o-mini", "config": {"execution": {"background_enabled": true}}}),
        )
        .await?;
    let dead =
        dead_executor(&app, &tenant, &agent, &model, json!({"callback_url": "https://caller.example/cb"}))
            .await?;
    let cancelled = dead_executor(&app, &tenant, &agent, &model, json!({})).await?;
    let (dead_id, cancelled_id) = (str_field(&dead, "id")?, str_field(&cancelled, "id")?);
    let (status, body) =
        send(app.client(&tenant.key, Method::POST, &format!("/runs/{cancelled_id}/cancel"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["cancel_requested"], true, "a running run's cancel waits for its executor: {body}");
    let dead_session = str_field(&dead, "session_id")?;
    assert_eq!(session(&app, &tenant, &dead_session).await?["runtime_status"], "running");

    // While their leases hold, the sweep leaves them be (their executors may be alive).
    let report = app.sweep().await?;
    assert_eq!(report.dead_runs_settled, 0, "{report:?}");
    assert_eq!(run(&app, &tenant, &dead_id).await?["status"], "running");

    // Once the lease lapsed (a pass just after it), each is settled, once.
    let lapsed = agentplane_api::edge::now().plus_millis(SLOT_LEASE_MS + 1000);
    let report = sweep_once(&app.store, lapsed).await?;
    assert_eq!((report.dead_runs_settled, report.failed), (2, 0), "{report:?}");
    let again = sweep_once(&app.store, lapsed.plus_millis(60_000)).await?;
    assert_eq!(again.dead_runs_settled, 0, "{again:?}");

    let failed = run(&app, &tenant, &dead_id).await?;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["code"], "executor_lost", "{failed}");
    assert!(failed["ended_at"].is_i64(), "{failed}");
    assert_eq!(failed["callback"]["event_type"], "agent_run.failed", "the callback is owed: {failed}");
    let ended = run(&app, &tenant, &cancelled_id).await?;
    assert_eq!(
        (ended["status"].clone(), ended["error"].clone()),
        (json!("canceled"), Value::Null),
        "{ended}"
    );

    // The session the dead turn held is free again, and takes a new turn.
    let released = session(&app, &tenant, &dead_session).await?;
    assert_eq!(
        (released["runtime_status"].clone(), released["stop_reason"].clone()),
        (json!("idle"), json!("error"))
    );
    model.push(Reply::text("back"));
    let (status, body) = send(
        app.client(&tenant.key, Method::POST, &format!("/sessions/{dead_session}/messages"))
            .json(&json!({"input": "again"})),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    Ok(())
}

#[tokio::test]
async fn a_run_that_started_before_leases_takes_its_lease_at_its_next_renewal() -> R {
    use agentplane_domain::agent_run::{AgentRun, RunStatus};
    use aws_sdk_dynamodb::types::AttributeValue;
    let app = TestApp::spawn_without_runs_consumer().await?;
    let tenant = app.tenant().await?;
    let project: agentplane_domain::ProjectId = tenant.project_id.parse()?;
    let now = agentplane_api::edge::now();
    let run: AgentRun = serde_json::from_value(json!({
        "id": RunId::from_random([9; 12]), "project_id": project,
        "session_id": agentplane_domain::SessionId::from_random([9; 16]),
        "agent_id": agentplane_domain::ids::AgentId::from_random([9; 16]),
        "channel": "draft", "status": "queued", "input": "old", "max_duration_ms": 60_000,
        "created_at": now, "expires_at": now.plus_seconds(86_400),
    }))?;
    let announced =
        agentplane_engine::background::run_event(&run).ok_or_else(|| anyhow::anyhow!("no event"))?;
    app.store.agent_runs().create(&run, &announced).await?;
    let key = agentplane_domain::tenant::TenantKey::Project(project).key();
    let lease = now.plus_millis(1000);
    let slot = app
        .store
        .agent_runs()
        .start(&run, RunStatus::Queued, &key, 10, now, lease)
        .await?
        .map_err(|refused| anyhow::anyhow!("{refused:?}"))?;
    // As an item written before leases: running, under its retention, no lease.
    app.store
        .dynamo
        .update_item()
        .table_name(&app.store.names.main_table)
        .key("PK", AttributeValue::S(format!("PROJECT#{project}")))
        .key("SK", AttributeValue::S(format!("RUN#{}", run.id)))
        .update_expression("SET GSI2PK = :pk, GSI2SK = :sk REMOVE lease_until")
        .expression_attribute_values(":pk", AttributeValue::S("AGENT_RUNS_EXPIRE".into()))
        .expression_attribute_values(
            ":sk",
            AttributeValue::S(format!("{:015}#{project}#{}", run.expires_at.unix_millis(), run.id)),
        )
        .send()
        .await?;
    let later = now.plus_millis(SLOT_LEASE_MS + 60_000);
    assert_eq!(sweep_once(&app.store, later).await?.dead_runs_settled, 0, "no lease, not found");
    // Its executor's next renewal files it under its lease, and the retention does not take it.
    app.store.agent_runs().renew(&slot, &run, lease).await?;
    let report = sweep_once(&app.store, lease.plus_millis(-1)).await?;
    assert_eq!((report.dead_runs_settled, report.runs_deleted), (0, 0), "{report:?}");
    let report = sweep_once(&app.store, later).await?;
    assert_eq!((report.dead_runs_settled, report.runs_deleted), (1, 0), "{report:?}");
    let stored = app.store.agent_runs().get(&project, &run.id).await?;
    assert_eq!(stored.status, RunStatus::Failed);
    assert_eq!(stored.lease_until, None);
    // Its end files it back under its retention.
    assert_eq!(sweep_once(&app.store, run.expires_at).await?.runs_deleted, 1);
    Ok(())
}
