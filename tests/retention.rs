//! The retention sweep deletes background runs and webhook delivery records once they outlived
//! their retention, and keeps what is younger (session files: `files.rs`). Each test sweeps at
//! chosen times against its own tables, so the counts are exact.

use std::time::Duration;

use agentplane_api::jobs::sweep_once;
use agentplane_domain::Timestamp;
use agentplane_domain::agent_run::RunId;
use agentplane_domain::webhook::RECORD_RETENTION_DAYS;
use agentplane_engine::background::BackgroundConfig;
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{Tenant, TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn run_to_end(app: &TestApp, tenant: &Tenant, agent: &str) -> anyhow::Result<String> {
    let (status, run) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": agent, "input": "later", "background": true})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::ACCEPTED, "{status} {run}");
    let id = str_field(&run, "id")?;
    for _ in 0..600 {
        let (_, got) = send(app.client(&tenant.key, Method::GET, &format!("/runs/{id}"))).await?;
        if got["status"] == "succeeded" {
            return Ok(id);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("run {id} never succeeded")
}

#[tokio::test]
async fn a_background_run_is_deleted_after_its_retention_and_a_younger_one_kept() -> R {
    let model = ScriptedModel::start().await?;
    let background = BackgroundConfig { wait_s: 1, ..BackgroundConfig::default() };
    let app = TestApp::spawn_with_model_and(&model, |app| app.with_background(background)).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "worker", "model": "gpt-4o-mini",
                   "config": {"execution": {"background_enabled": true}}}),
        )
        .await?;
    model.push(Reply::text("first"));
    let old = run_to_end(&app, &tenant, &agent).await?;
    // The second run expires at least a second after the first.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    model.push(Reply::text("second"));
    let young = run_to_end(&app, &tenant, &agent).await?;

    let project = tenant.project_id.parse()?;
    let stored = app.store.agent_runs().get(&project, &old.parse::<RunId>()?).await?;
    let retention = stored.expires_at.unix_seconds() - stored.created_at.unix_seconds();
    assert_eq!(retention, 30 * 86_400, "AGENT_RUN_RETENTION_DAYS: 30");

    // A pass now, or a second before the first run's expiry, deletes nothing.
    assert_eq!(sweep_once(&app.store, agentplane_engine::now()).await?.runs_deleted, 0);
    assert_eq!(sweep_once(&app.store, stored.expires_at.plus_seconds(-1)).await?.runs_deleted, 0);
    // At its expiry it goes, alone; the API no longer knows it, and lists only the other.
    let report = sweep_once(&app.store, stored.expires_at).await?;
    assert_eq!((report.runs_deleted, report.failed), (1, 0), "{report:?}");
    let (status, gone) = send(app.client(&tenant.key, Method::GET, &format!("/runs/{old}"))).await?;
    assert_error((status, &gone), StatusCode::NOT_FOUND, "run_not_found");
    let (status, kept) = send(app.client(&tenant.key, Method::GET, &format!("/runs/{young}"))).await?;
    assert_eq!((status, &kept["status"]), (StatusCode::OK, &json!("succeeded")), "{kept}");
    // The same pass again: nothing more.
    assert_eq!(sweep_once(&app.store, stored.expires_at).await?.runs_deleted, 0);
    Ok(())
}

/// A receiver that answers 200 to every delivery.
async fn receiver() -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    let router = axum::Router::new().route("/hook", axum::routing::post(|| async { "ok" }));
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(url)
}

async fn messages(app: &TestApp, key: &str, endpoint: &str) -> anyhow::Result<Vec<Value>> {
    let (status, page) =
        send(app.client(key, Method::GET, &format!("/webhooks/{endpoint}/messages"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "{status} {page}");
    Ok(page["data"].as_array().cloned().unwrap_or_default())
}

#[tokio::test]
async fn delivery_records_are_deleted_with_their_attempts_after_their_retention() -> R {
    // Loopback receivers allowed, as in the local gateway.
    let app = TestApp::spawn_with(|app: agentplane_api::App| {
        let key = agentplane_engine::webhooks::SealKey::from_bytes(&[7; 32]).map(std::sync::Arc::new).ok();
        app.with_webhooks(agentplane_engine::webhooks::WebhookConfig::new(key, true))
    })
    .await?;
    let tenant = app.tenant().await?;
    let (status, endpoint) =
        send(app.client(&tenant.key, Method::POST, "/webhooks").json(&json!({"url": receiver().await?})))
            .await?;
    assert_eq!(status, StatusCode::CREATED, "{endpoint}");
    let endpoint = str_field(&endpoint, "id")?;
    let test =
        |app: &TestApp| send(app.client(&tenant.key, Method::POST, &format!("/webhooks/{endpoint}/test")));
    let (status, attempt) = test(&app).await?;
    assert_eq!((status, &attempt["statusCode"]), (StatusCode::OK, &json!(200)), "{attempt}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _) = test(&app).await?;
    assert_eq!(status, StatusCode::OK);
    let listed = messages(&app, &tenant.key, &endpoint).await?;
    assert_eq!(listed.len(), 2, "{listed:?}");
    // Newest first: the older message is the last.
    let old = &listed[1];
    assert_eq!(
        (old["status"].as_str(), old["attempts"].as_array().map(Vec::len)),
        (Some("succeeded"), Some(1))
    );
    let old_id = str_field(old, "id")?;
    let expires = Timestamp::from_unix_seconds(old["createdAt"].as_i64().unwrap_or_default() + 1)
        .plus_seconds(RECORD_RETENTION_DAYS * 86_400);

    let before = sweep_once(&app.store, expires.plus_seconds(-2)).await?;
    assert_eq!(before.records_deleted, 0, "{before:?}");
    let report = sweep_once(&app.store, expires).await?;
    assert_eq!((report.records_deleted, report.failed), (1, 0), "{report:?}");
    let listed = messages(&app, &tenant.key, &endpoint).await?;
    assert_eq!(listed.len(), 1, "the younger message stays: {listed:?}");
    assert_ne!(listed[0]["id"].as_str(), Some(old_id.as_str()));
    assert_eq!(listed[0]["attempts"].as_array().map(Vec::len), Some(1), "with its attempt");
    // Gone with its locator: redelivering it names no message.
    let (status, body) = send(app.client(
        &tenant.key,
        Method::POST,
        &format!("/webhooks/{endpoint}/messages/{old_id}/redeliver"),
    ))
    .await?;
    assert_error((status, &body), StatusCode::NOT_FOUND, "webhook_message_not_found");
    // And its attempt went with it: the endpoint's partition holds the younger message's three
    // items (message, locator, attempt) and nothing of the older one.
    let items = app
        .store
        .dynamo
        .query()
        .table_name(&app.store.names.main_table)
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(
            ":pk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("WEBHOOK#{endpoint}")),
        )
        .send()
        .await?
        .items
        .unwrap_or_default();
    let of_old = items
        .iter()
        .filter(|i| i.get("SK").and_then(|v| v.as_s().ok()).is_some_and(|sk| sk.contains(&old_id)))
        .count();
    assert_eq!((items.len(), of_old), (3, 0), "{items:?}");
    Ok(())
}
