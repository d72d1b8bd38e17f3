//! The retention sweep deletes background runs and webhook delivery records once they outlived
//! their retention, and keeps what is younger (session files: `files.rs`); and checkpoint blobs
//! and manifests of the workspaces bucket once nothing references them and their grace period
//! is over. Each test sweeps at chosen times against its own tables and buckets, so the counts
//! are exact.

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
        app.with_webhooks(agentplane_engine::webhooks::WebhookConfig::new(
            key,
            agentplane_tests::loopback_receivers(),
        ))
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

// ---- The workspaces bucket: checkpoint blobs and manifests no live item references ----

use agentplane_domain::platform::ActiveRollback;
use agentplane_domain::platform::manifest::{self, Manifest, ManifestEntry};
use agentplane_domain::platform::workspace_sweep::{GRACE_SECONDS, Phase, SCRATCH_RETENTION_SECONDS};
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_engine::workspace_sweep::{Limits, WorkspaceReport, sweep_workspaces};
use agentplane_store::{Objects, Store};
use sha2::{Digest, Sha256};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Uploads `content` as a checkpoint's node would: its blob, content-addressed.
async fn blob(bucket: &Objects, content: &str) -> anyhow::Result<String> {
    let sha = hex(&Sha256::digest(content.as_bytes()));
    bucket.put(&manifest::blob_key(&sha), content.as_bytes().to_vec()).await?;
    Ok(sha)
}

/// Writes the manifest of `files` (path, blob digest) as Core does; its id.
async fn manifest_of(bucket: &Objects, files: &[(&str, &str)]) -> anyhow::Result<String> {
    let manifest = Manifest {
        files: files
            .iter()
            .map(|(path, sha)| {
                (
                    format!("/workspace/{path}"),
                    ManifestEntry { sha256: (*sha).to_owned(), size: 1, mode: None },
                )
            })
            .collect(),
    };
    let body = serde_json::to_vec(&manifest)?;
    let id = hex(&Sha256::digest(&body));
    bucket.put(&Manifest::key(&id), body).await?;
    Ok(id)
}

async fn exists(bucket: &Objects, key: &str) -> anyhow::Result<bool> {
    Ok(bucket.size(key).await?.is_some())
}

async fn made(app: &TestApp, key: &str, path: &str, body: Value) -> anyhow::Result<String> {
    let (status, made) = send(app.v1(key, Method::POST, path).json(&body)).await?;
    anyhow::ensure!(
        status == StatusCode::CREATED || status == StatusCode::ACCEPTED,
        "{path}: {status} {made}"
    );
    Ok(made["data"]["id"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn the_sweep_deletes_old_unreferenced_checkpoint_objects_and_keeps_referenced_and_fresh_ones() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let bucket = app.store.workspaces()?.clone();
    // An environment with a session and a Run (queued: nobody consumes the runs queue).
    let env = made(&app, &tenant.key, "/environments", json!({})).await?;
    let session = made(&app, &tenant.key, &format!("/environments/{env}/sessions"), json!({})).await?;
    let run = made(
        &app,
        &tenant.key,
        &format!("/environments/{env}/sessions/{session}/runs"),
        json!({"model": "gpt-4o-mini", "input": "go"}),
    )
    .await?;

    // Every reference field holds a manifest: the environment's initial checkpoint and its
    // rollback under way, the Run's start and end. `shared` is also in a dead manifest.
    let shared = blob(&bucket, "shared").await?;
    let (initial, start, end, restore) = (
        blob(&bucket, "initial").await?,
        blob(&bucket, "start").await?,
        blob(&bucket, "end").await?,
        blob(&bucket, "restore").await?,
    );
    let m_initial = manifest_of(&bucket, &[("a", &initial), ("s", &shared)]).await?;
    let m_start = manifest_of(&bucket, &[("a", &start)]).await?;
    let m_end = manifest_of(&bucket, &[("a", &end)]).await?;
    let m_restore = manifest_of(&bucket, &[("a", &restore)]).await?;
    // Dead: a manifest nothing records (its Run's update never came) and a blob whose
    // checkpoint never wrote its manifest.
    let dead = blob(&bucket, "dead").await?;
    let m_dead = manifest_of(&bucket, &[("a", &dead), ("s", &shared)]).await?;
    let orphan = blob(&bucket, "orphan").await?;
    // Not ours: never touched.
    bucket.put("blobs/sha256/not-a-digest", b"x".to_vec()).await?;
    bucket.put("scratch/0a/scan.json", b"[]".to_vec()).await?;

    let project = tenant.project_id.parse()?;
    let env_id: EnvironmentId = env.parse()?;
    app.store.environments().set_initial_checkpoint(&project, &env_id, &m_initial).await?;
    let mut stored = app.store.runs().get(&project, &run.parse()?).await?;
    stored.start_manifest = Some(m_start.clone());
    stored.checkpoint.snapshot_id = Some(m_end.clone());
    let expected = stored.version;
    stored.version += 1;
    app.store.runs().replace(&stored, expected).await?;
    let rollback = ActiveRollback {
        run_id: stored.id,
        from_sequence: 1,
        through_sequence: 1,
        manifest: Some(m_restore.clone()),
        accepted_at: agentplane_engine::now(),
    };
    app.store.environments().begin_rollback(&project, &env_id, &rollback).await?;

    // A checkpoint in flight writes its blob later than the rest.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let cut = agentplane_engine::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let in_flight = blob(&bucket, "in flight").await?;

    // At `cut` nothing is past its grace: a pass deletes nothing.
    let report = sweep_once(&app.store, cut).await?;
    assert_eq!((report.blobs_deleted, report.manifests_deleted, report.failed), (0, 0, 0), "{report:?}");

    // A grace period after `cut` (the next cycle is due): the dead objects go, the rest stays.
    let later = cut.plus_seconds(GRACE_SECONDS);
    let report = sweep_once(&app.store, later).await?;
    assert_eq!((report.blobs_deleted, report.manifests_deleted, report.failed), (2, 1, 0), "{report:?}");
    let blob_key = |sha: &String| manifest::blob_key(sha);
    for sha in [&shared, &initial, &start, &end, &restore, &in_flight] {
        assert!(exists(&bucket, &blob_key(sha)).await?, "referenced or fresh blob {sha} deleted");
    }
    for id in [&m_initial, &m_start, &m_end, &m_restore] {
        assert!(exists(&bucket, &Manifest::key(id)).await?, "referenced manifest {id} deleted");
    }
    assert!(!exists(&bucket, &blob_key(&dead)).await?, "the dead manifest's own blob stays");
    assert!(!exists(&bucket, &blob_key(&orphan)).await?, "the orphan blob stays");
    assert!(!exists(&bucket, &Manifest::key(&m_dead)).await?, "the dead manifest stays");
    assert!(exists(&bucket, "blobs/sha256/not-a-digest").await?);
    assert!(exists(&bucket, "scratch/0a/scan.json").await?);
    // The job's summary says so.
    let summary =
        json!({"blobs_deleted": report.blobs_deleted, "manifests_deleted": report.manifests_deleted});
    assert_eq!(summary, json!({"blobs_deleted": 2, "manifests_deleted": 1}));

    // The same pass again: its cycle is done and the next not due; nothing more.
    let again = sweep_once(&app.store, later).await?;
    assert_eq!((again.blobs_deleted, again.manifests_deleted), (0, 0), "{again:?}");
    // A grace period later the checkpoint that was in flight never wrote its manifest: its
    // blob goes too, and nothing referenced ever does.
    let report = sweep_once(&app.store, later.plus_seconds(GRACE_SECONDS)).await?;
    assert_eq!((report.blobs_deleted, report.manifests_deleted, report.failed), (1, 0, 0), "{report:?}");
    assert!(!exists(&bucket, &blob_key(&in_flight)).await?);
    let left = bucket.keys("blobs/").await?.len() + bucket.keys("manifests/").await?.len();
    assert_eq!(left, 5 + 1 + 4, "the five referenced blobs, the foreign key and four manifests");
    Ok(())
}

#[tokio::test]
async fn scratch_objects_a_crash_left_behind_go_after_a_day_and_nothing_else_with_them() -> R {
    let app = TestApp::spawn().await?;
    let bucket = app.store.workspaces()?;
    bucket.put("scratch/0b/scan.json", b"[]".to_vec()).await?;
    bucket.put("scratch/0c/plan.json", b"{}".to_vec()).await?;
    bucket.put("transcripts/run/transcript.json", b"{}".to_vec()).await?;
    let now = agentplane_engine::now();
    // In use (written just now): kept.
    let report = sweep_once(&app.store, now).await?;
    assert_eq!((report.scratch_deleted, report.failed), (0, 0), "{report:?}");
    assert!(exists(bucket, "scratch/0b/scan.json").await?);
    // A day later both are leftovers; transcripts are never touched.
    let report = sweep_once(&app.store, now.plus_seconds(SCRATCH_RETENTION_SECONDS + 60)).await?;
    assert_eq!((report.scratch_deleted, report.failed), (2, 0), "{report:?}");
    assert!(!exists(bucket, "scratch/0b/scan.json").await?);
    assert!(!exists(bucket, "scratch/0c/plan.json").await?);
    assert!(exists(bucket, "transcripts/run/transcript.json").await?);
    // Twice: nothing more.
    let again = sweep_once(&app.store, now.plus_seconds(SCRATCH_RETENTION_SECONDS + 60)).await?;
    assert_eq!(again.scratch_deleted, 0);
    Ok(())
}

/// One step of the paged sweep: two passes at once, as two overlapping invocations would.
async fn two_passes(
    store: &Store,
    bucket: &Objects,
    at: Timestamp,
    limits: Limits,
) -> anyhow::Result<WorkspaceReport> {
    let (a, b) = tokio::join!(
        sweep_workspaces(store, bucket, at, limits),
        sweep_workspaces(store, bucket, at, limits)
    );
    let (a, b) = (a?, b?);
    Ok(WorkspaceReport {
        pages: a.pages + b.pages,
        manifests_marked: a.manifests_marked + b.manifests_marked,
        blobs_deleted: a.blobs_deleted + b.blobs_deleted,
        manifests_deleted: a.manifests_deleted + b.manifests_deleted,
        deferred: a.deferred + b.deferred,
        raced: a.raced || b.raced,
    })
}

#[tokio::test]
async fn the_sweep_works_in_small_pages_resumes_from_its_cursor_and_concurrent_passes_delete_once() -> R {
    let store = agentplane_tests::fresh_store().await?;
    let bucket = store.workspaces()?.clone();
    // Three environments whose initial checkpoints keep five blobs (the main table also holds
    // items naming no manifest, so the scan has pages to skip).
    let project = agentplane_domain::ProjectId::from_random([7; 16]);
    let mut kept = Vec::new();
    for n in 0..5u8 {
        kept.push(blob(&bucket, &format!("kept {n}")).await?);
    }
    for n in 0..3u8 {
        let env = EnvironmentId::from_random([n + 1; 16]);
        let environment =
            agentplane_domain::platform::Environment::new(env, project, None, agentplane_engine::now());
        store.environments().create(&environment, 100).await?;
        let files: Vec<(String, &str)> =
            kept.iter().map(|sha| (format!("f{n}-{sha}"), sha.as_str())).collect();
        let files: Vec<(&str, &str)> = files.iter().map(|(p, s)| (p.as_str(), *s)).collect();
        let id = manifest_of(&bucket, &files[..(n as usize + 3)]).await?;
        store.environments().set_initial_checkpoint(&project, &env, &id).await?;
    }
    let mut dead = Vec::new();
    for n in 0..23u8 {
        dead.push(blob(&bucket, &format!("dead {n}")).await?);
    }
    for n in 0..3u8 {
        manifest_of(&bucket, &[("x", &dead[n as usize])]).await?;
    }

    let at = agentplane_engine::now().plus_seconds(2 * GRACE_SECONDS);
    let limits = Limits { scan_page: 1, list_page: 4, max_pages: 2, ..Limits::default() };
    let (mut total, mut passes, mut phases) = (WorkspaceReport::default(), 0, Vec::new());
    loop {
        let step = two_passes(&store, &bucket, at, limits).await?;
        passes += 1;
        total.blobs_deleted += step.blobs_deleted;
        total.manifests_deleted += step.manifests_deleted;
        total.manifests_marked += step.manifests_marked;
        let cursor =
            store.workspace_sweep().cursor().await?.ok_or_else(|| anyhow::anyhow!("no cursor item"))?;
        assert_eq!(cursor.number, 1, "one cycle throughout");
        phases.push(std::mem::discriminant(&cursor.phase));
        if matches!(cursor.phase, Phase::Done { .. }) {
            break;
        }
        anyhow::ensure!(passes < 100, "the sweep never finished: {cursor:?}");
        // Each step moved the cursor on (at most two pages a pass, so the work was spread).
        assert!(step.pages >= 1, "a step did nothing: {step:?} at {cursor:?}");
    }
    assert!(passes > 5, "a small page size needs many passes, took {passes}");
    assert!(phases.len() > 2 && phases.first() != phases.last(), "mark, then sweep, then done");
    // Exactly the dead: each deleted once although every page was listed by two passes.
    assert_eq!((total.blobs_deleted, total.manifests_deleted), (23, 3), "{total:?}");
    // Two passes at once may both mark a manifest (marks are idempotent); never fewer than all.
    assert!((3..=6).contains(&total.manifests_marked), "{total:?}");
    let mut left = bucket.keys(manifest::blob_key("").as_str()).await?;
    left.sort();
    let mut want: Vec<String> = kept.iter().map(|sha| manifest::blob_key(sha)).collect();
    want.sort();
    assert_eq!(left, want);
    assert_eq!(bucket.keys("manifests/").await?.len(), 3);

    // Again at the same time: the cycle is done and the next not due, so nothing happens; a
    // cycle later, nothing is left to delete.
    assert_eq!(two_passes(&store, &bucket, at, limits).await?.pages, 0);
    let mut next = WorkspaceReport::default();
    for _ in 0..100 {
        let step = two_passes(&store, &bucket, at.plus_seconds(GRACE_SECONDS), limits).await?;
        next.blobs_deleted += step.blobs_deleted + step.manifests_deleted;
        if step.pages == 0 {
            break;
        }
    }
    assert_eq!(next.blobs_deleted, 0);
    assert_eq!(store.workspace_sweep().cursor().await?.map(|c| c.number), Some(2));
    assert_eq!(bucket.keys("blobs/").await?.len(), 5);
    Ok(())
}

#[tokio::test]
async fn a_refreshed_blob_keeps_its_bytes_and_reads_as_written_anew_so_the_sweep_keeps_it() -> R {
    // What a checkpoint does to an old blob it is about to rely on.
    let store = agentplane_tests::fresh_store().await?;
    let bucket = store.workspaces()?.clone();
    let sha = blob(&bucket, "reused").await?;
    let key = manifest::blob_key(&sha);
    let before = bucket.written_at(&key).await?.ok_or_else(|| anyhow::anyhow!("no blob"))?;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(bucket.refresh(&key, "application/octet-stream").await?);
    let after = bucket.written_at(&key).await?.ok_or_else(|| anyhow::anyhow!("refresh lost the blob"))?;
    assert!(after > before, "{after:?} after {before:?}");
    assert_eq!(bucket.get(&key).await?, b"reused");
    // A blob that is not there is not made by a refresh.
    let absent = manifest::blob_key(&"0".repeat(64));
    assert!(!bucket.refresh(&absent, "application/octet-stream").await?);
    assert!(!exists(&bucket, &absent).await?);
    // A sweep whose cycle started a grace period after the first write, but less than that
    // after the refresh, keeps it though nothing references it.
    let report =
        sweep_workspaces(&store, &bucket, before.plus_seconds(GRACE_SECONDS + 1), Limits::default()).await?;
    assert_eq!(report.blobs_deleted, 0, "{report:?}");
    assert!(exists(&bucket, &key).await?);
    Ok(())
}
