//! Attack: one Platform session takes down an operator view (issue 24, item 7). A Platform
//! session was stored with an `environment_id` and `environment_mode: none`, a pair the runtime
//! rules call an inconsistent identity, so once any existed the Core observation list answered
//! 500 on every page that held it, for every operator. Platform sessions are self_hosted now;
//! the store refuses to write the inconsistent pair at all; sessions stored in the old shape
//! read as self_hosted and the retention sweep rewrites them (resumable, idempotent).

use agentplane_admin_client::{AdminClient, ListRuntimeObservations};
use agentplane_domain::session::{EnvironmentMode, NewSession};
use agentplane_domain::telemetry::observation_wire::{InstanceKind, ObservationStatus};
use agentplane_domain::telemetry::{EnvironmentId, Reason};
use agentplane_domain::{ProjectId, SessionId};
use agentplane_store::dynamo::keys::{project_pk, session_sk};
use agentplane_store::{Store, StoreError};
use agentplane_tests::{Tenant, TestApp, send};
use aws_sdk_dynamodb::types::AttributeValue;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

const LIST: &str = "/core/v1/sandbox/runtime-observations?limit=100";

/// A Platform environment and a session in it: `(environment, session)`.
async fn platform_session(app: &TestApp, tenant: &Tenant) -> anyhow::Result<(String, SessionId)> {
    let v1 = |method: Method, path: &str| app.request(method, &format!("/v1{path}")).bearer_auth(&tenant.key);
    let (status, env) = send(v1(Method::POST, "/environments").json(&json!({ "name": "repo" }))).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "environment: {status} {env}");
    let env = env["data"]["id"].as_str().unwrap_or_default().to_owned();
    let (status, session) = send(v1(Method::POST, &format!("/environments/{env}/sessions"))).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "session: {status} {session}");
    Ok((env, session["data"]["id"].as_str().unwrap_or_default().parse()?))
}

/// The stored `environment_mode` attribute of a session item, as DynamoDB holds it.
async fn stored_mode(store: &Store, project: &ProjectId, session: &SessionId) -> anyhow::Result<String> {
    let item = store
        .dynamo
        .get_item()
        .table_name(&store.names.main_table)
        .key("PK", AttributeValue::S(project_pk(project)))
        .key("SK", AttributeValue::S(session_sk(session)))
        .consistent_read(true)
        .send()
        .await?
        .item
        .unwrap_or_default();
    Ok(item.get("environment_mode").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default())
}

/// Puts a session item back in the shape the earlier release wrote for Platform sessions:
/// `environment_mode: none` beside its `environment_id`.
async fn write_old_shape(store: &Store, project: &ProjectId, session: &SessionId) -> R {
    store
        .dynamo
        .update_item()
        .table_name(&store.names.main_table)
        .key("PK", AttributeValue::S(project_pk(project)))
        .key("SK", AttributeValue::S(session_sk(session)))
        .update_expression("SET environment_mode = :none")
        .condition_expression("attribute_exists(environment_id)")
        .expression_attribute_values(":none", AttributeValue::S("none".into()))
        .send()
        .await?;
    Ok(())
}

/// The Platform session's row of the list and its single read: both 200, self_hosted, in the
/// admin client's checks (which reject a whole page for one bad row).
async fn assert_reads_self_hosted(app: &TestApp, project: ProjectId, session: SessionId, env: &str) -> R {
    let (status, page) = send(app.core(Method::GET, LIST)).await?;
    assert_eq!(status, StatusCode::OK, "{page}");
    let row = page["data"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["observation"]["session_id"] == session.to_string()))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(row["project_id"], project.to_string(), "{page}");
    let o = &row["observation"];
    assert_eq!((o["mode"].as_str(), o["environment_id"].as_str()), (Some("self_hosted"), Some(env)), "{row}");
    assert_eq!(o["status"], "unsupported");
    assert_eq!(o["reason"], "runtime_mode_not_observable");
    assert_eq!(o["instance"]["kind"], "self_hosted_connection");

    let admin = AdminClient::new(&app.base, &app.core_key);
    let list = admin
        .list_runtime_observations(ListRuntimeObservations { limit: Some(100), ..Default::default() })
        .await?;
    assert!(list.data.iter().any(|r| r.observation.session_id == session));
    let single = admin.retrieve_runtime_observation(project, session).await?;
    assert_eq!(single.mode, EnvironmentMode::SelfHosted);
    assert_eq!(single.environment_id, Some(env.parse::<EnvironmentId>()?));
    assert_eq!(
        (single.status, single.reason),
        (ObservationStatus::Unsupported, Some(Reason::RuntimeModeNotObservable))
    );
    assert_eq!(single.instance.kind, InstanceKind::SelfHostedConnection);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn core_observation_reads_answer_with_platform_sessions_present() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let project: ProjectId = tenant.project_id.parse()?;
    // An ordinary session beside it, and another operator's view of another project's rows.
    let (status, body) = send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (env, session) = platform_session(&app, &tenant).await?;
    assert_eq!(stored_mode(&app.store, &project, &session).await?, "self_hosted");
    assert_reads_self_hosted(&app, project, session, &env).await?;
    // The Platform surface still finds it in its environment.
    let (status, body) = send(
        app.request(Method::GET, &format!("/v1/environments/{env}/sessions/{session}"))
            .bearer_auth(&tenant.key),
    )
    .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_old_shape_platform_session_reads_self_hosted_and_the_sweep_rewrites_it() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let project: ProjectId = tenant.project_id.parse()?;
    let (env, session) = platform_session(&app, &tenant).await?;
    write_old_shape(&app.store, &project, &session).await?;
    assert_eq!(stored_mode(&app.store, &project, &session).await?, "none");

    // Before any backfill, both Core reads answer (the old release answered 500 here).
    assert_reads_self_hosted(&app, project, session, &env).await?;

    // The sweep rewrites the item; a second pass has nothing left to do.
    let report = app.sweep().await?;
    assert_eq!(report.sessions_upgraded, 1, "{report:?}");
    assert_eq!(stored_mode(&app.store, &project, &session).await?, "self_hosted");
    assert_eq!(app.sweep().await?.sessions_upgraded, 0);
    assert_reads_self_hosted(&app, project, session, &env).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_backfill_resumes_where_it_stopped_and_rewrites_each_item_once() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let project: ProjectId = tenant.project_id.parse()?;
    let mut old = Vec::new();
    for _ in 0..3 {
        let (_, session) = platform_session(&app, &tenant).await?;
        write_old_shape(&app.store, &project, &session).await?;
        old.push(session);
        // Ordinary sessions between them: pages the walk reads and leaves.
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({}))).await?;
    }
    // One-item pages, one page a pass: many passes, each from the cursor the last one kept.
    let placement = app.store.session_placement();
    let (mut rewritten, mut passes) = (0, 0);
    loop {
        let pass = placement.backfill_pages(1, 1).await?;
        rewritten += pass.rewritten;
        passes += 1;
        if pass.done {
            break;
        }
        anyhow::ensure!(passes < 50, "the backfill never finished");
    }
    assert_eq!(rewritten, 3);
    assert!(passes > 3, "{passes} passes for 6 sessions in one-item pages");
    for session in &old {
        assert_eq!(stored_mode(&app.store, &project, session).await?, "self_hosted");
    }
    // Done is done: later passes read the marker only.
    let again = placement.backfill_pages(10, 100).await?;
    assert_eq!((again.rewritten, again.done), (0, true));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_whose_mode_and_environment_disagree_is_never_written() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let project: ProjectId = tenant.project_id.parse()?;
    let environment = EnvironmentId::from_random(agentplane_api::edge::random()?);
    let now = agentplane_api::edge::now();
    for (mode, environment_id) in [
        (EnvironmentMode::None, Some(environment)),
        (EnvironmentMode::SelfHosted, None),
        (EnvironmentMode::OpenaiHosted, None),
    ] {
        let id = SessionId::from_random(agentplane_api::edge::random()?);
        let mut session =
            NewSession { environment_mode: mode, ..NewSession::default() }.into_session(id, project, now);
        session.environment_id = environment_id;
        let written = app.store.sessions().create(&session).await;
        assert!(matches!(written, Err(StoreError::Corrupt(_))), "{mode:?}: {written:?}");
        assert!(matches!(app.store.sessions().get(&project, &id).await, Err(StoreError::NotFound)));
    }
    let (status, page) = send(app.core(Method::GET, LIST)).await?;
    assert_eq!(status, StatusCode::OK, "{page}");
    Ok(())
}
