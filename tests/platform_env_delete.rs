//! `DELETE /v1/environments/{id}`: accepted at once (202, `deletedAt`), after which the
//! environment, its sessions and its Runs read 404 and no Run can be created in it; the
//! retention sweep's purge step then ends its sandbox and deletes its Runs, its sessions' links
//! and the checkpoints (manifests, blobs) no other environment shares. Checked where they live:
//! the main table and the workspaces bucket.

use std::time::{Duration, Instant};

use agentplane_domain::platform::manifest::{Manifest, blob_key};
use agentplane_domain::sandbox::SandboxState;
use agentplane_store::StoreError;
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, TestNode, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn put_file(app: &TestApp, key: &str, env: &str, path: &str, bytes: &[u8]) -> R {
    let (status, body) = send(
        app.v1(key, Method::PUT, &format!("/environments/{env}/files?path={path}")).body(bytes.to_vec()),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::OK, "{body}");
    Ok(())
}

fn sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates a Run and waits until it is `completed` with a ready checkpoint.
async fn completed_run(app: &TestApp, key: &str, env: &str, session: &str) -> anyhow::Result<Value> {
    let runs = format!("/environments/{env}/sessions/{session}/runs");
    let (status, created) =
        send(app.v1(key, Method::POST, &runs).json(&json!({"model": "m", "input": "work"}))).await?;
    anyhow::ensure!(status == StatusCode::ACCEPTED, "{created}");
    let path = format!("{runs}/{}", created["data"]["id"].as_str().unwrap_or_default());
    let started = Instant::now();
    loop {
        let (_, body) = send(app.v1(key, Method::GET, &path)).await?;
        let data = &body["data"];
        if data["status"] == "completed" && data["checkpoint"]["status"] == "ready" {
            return Ok(data.clone());
        }
        anyhow::ensure!(
            !matches!(data["status"].as_str(), Some("failed" | "stopped")),
            "the Run ended otherwise: {body}"
        );
        anyhow::ensure!(started.elapsed() < Duration::from_secs(60), "the Run never completed: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn code(body: &Value) -> &str {
    body.pointer("/error/code").and_then(Value::as_str).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_an_environment_purges_its_sandbox_runs_links_and_unshared_checkpoints() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let project = tenant.project_id.parse()?;
    let bucket = app.store.workspaces()?;

    // Environment A: a shared file, a file of its own, and a Run that writes another.
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    let shared = b"the same bytes in two environments".as_slice();
    let own = format!("only in {env}").into_bytes();
    put_file(&app, &tenant.key, &env, "/workspace/shared.txt", shared).await?;
    put_file(&app, &tenant.key, &env, "/workspace/own.txt", &own).await?;
    let written = format!("written by the Run of {env}");
    model.push(Reply::tool("w1", "write_file", &json!({"path": "/workspace/run.txt", "content": written})));
    model.push(Reply::text("done"));
    let run = completed_run(&app, &tenant.key, &env, &session).await?;
    let run_id = run["id"].as_str().unwrap_or_default().to_owned();
    let run_path = format!("/environments/{env}/sessions/{session}/runs/{run_id}");

    // Environment B: the shared file too, in a checkpoint of its own.
    let other = app.made(&tenant.key, "/environments").await?;
    let other_session = app.made(&tenant.key, &format!("/environments/{other}/sessions")).await?;
    put_file(&app, &tenant.key, &other, "/workspace/shared.txt", shared).await?;
    model.push(Reply::text("nothing to do"));
    let other_run = completed_run(&app, &tenant.key, &other, &other_session).await?;
    let other_manifest = Manifest::key(other_run["checkpoint"]["snapshotId"].as_str().unwrap_or_default());

    let stored = app.store.environments().get(&project, &env.parse()?).await?;
    let sandbox = stored.sandbox_id.clone().ok_or_else(|| anyhow::anyhow!("no sandbox"))?;
    let initial =
        stored.initial_checkpoint.clone().ok_or_else(|| anyhow::anyhow!("no initial checkpoint"))?;
    let a_manifests = [
        Manifest::key(&initial),
        Manifest::key(run["checkpoint"]["snapshotId"].as_str().unwrap_or_default()),
    ];
    let a_blobs = [blob_key(&sha(&own)), blob_key(&sha(written.as_bytes()))];
    let transcript = format!("runs/{run_id}/transcript.json");
    for key in
        a_manifests.iter().chain(&a_blobs).chain([&transcript, &other_manifest, &blob_key(&sha(shared))])
    {
        assert!(bucket.written_at(key).await?.is_some(), "{key} is not in the bucket before the delete");
    }

    // Another project's key cannot delete it (nor learn it exists).
    let stranger = app.tenant().await?;
    let (status, body) = send(app.v1(&stranger.key, Method::DELETE, &format!("/environments/{env}"))).await?;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "environment_not_found"), "{body}");
    let (status, _) = send(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}"))).await?;
    assert_eq!(status, StatusCode::OK);

    // Accepted, and a retry answers the same.
    let (status, deleted) =
        send(app.v1(&tenant.key, Method::DELETE, &format!("/environments/{env}"))).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{deleted}");
    assert_eq!(deleted["data"]["id"], env.as_str());
    assert!(deleted["data"]["deletedAt"].is_string(), "{deleted}");
    let (status, again) = send(app.v1(&tenant.key, Method::DELETE, &format!("/environments/{env}"))).await?;
    assert_eq!((status, &again), (StatusCode::ACCEPTED, &deleted));

    // From now on it reads as gone, with everything in it.
    for path in
        [format!("/environments/{env}"), format!("/environments/{env}/sessions/{session}"), run_path.clone()]
    {
        let (status, body) = send(app.v1(&tenant.key, Method::GET, &path)).await?;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
    }
    let (status, body) = send(
        app.v1(&tenant.key, Method::POST, &format!("/environments/{env}/sessions/{session}/runs"))
            .json(&json!({"model": "m", "input": "more"})),
    )
    .await?;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "environment_not_found"), "{body}");
    let (status, body) =
        send(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}/files?path=/workspace/own.txt")))
            .await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (_, listed) = send(app.v1(&tenant.key, Method::GET, "/environments")).await?;
    let ids: Vec<&str> =
        listed["data"].as_array().into_iter().flatten().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(ids, [other.as_str()], "{listed}");

    // The purge, as the retention sweep runs it, two hours on (past the bucket's grace for
    // unreferenced objects).
    let later = agentplane_api::edge::now().plus_seconds(7_200);
    let report = agentplane_api::jobs::purge_environments_once(&app.app, later).await?;
    assert_eq!(report.environments, 1, "{report:?}");
    assert_eq!((report.runs_deleted, report.links_deleted, report.failed), (1, 1, 0), "{report:?}");

    // The main table: no environment, Run or link item left; the sandbox ended.
    let env_id = env.parse()?;
    assert!(matches!(app.store.environments().get_any(&project, &env_id).await, Err(StoreError::NotFound)));
    assert!(matches!(app.store.runs().get(&project, &run_id.parse()?).await, Err(StoreError::NotFound)));
    let page =
        agentplane_domain::page::PageRequest::from_query(&agentplane_domain::query::Query::parse(None))?;
    let links = app.store.environments().list_sessions(&project, &env_id, &page, None).await?;
    assert!(links.items.is_empty(), "links left: {:?}", links.items.len());
    let ended = app.store.sandboxes().get_any(&sandbox).await?;
    assert_eq!(ended.lifecycle.effective(agentplane_api::edge::now()), SandboxState::Killed);

    // The bucket: its own manifests, blobs and saved transcript gone; what B shares stays.
    for key in a_manifests.iter().chain(&a_blobs).chain([&transcript]) {
        assert_eq!(bucket.written_at(key).await?, None, "{key} survived the purge");
    }
    for key in [&other_manifest, &blob_key(&sha(shared))] {
        assert!(bucket.written_at(key).await?.is_some(), "{key} of the other environment was deleted");
    }
    let response = app
        .v1(&tenant.key, Method::GET, &format!("/environments/{other}/files?path=/workspace/shared.txt"))
        .send()
        .await?;
    assert_eq!(response.status(), StatusCode::OK);

    // Purged: a retried purge finds nothing, a retried DELETE names nothing.
    let report = agentplane_api::jobs::purge_environments_once(&app.app, later).await?;
    assert_eq!(report, agentplane_api::jobs::PurgeReport::default());
    let (status, body) = send(app.v1(&tenant.key, Method::DELETE, &format!("/environments/{env}"))).await?;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "environment_not_found"), "{body}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_purge_leaves_young_unreferenced_objects_to_the_workspace_sweep() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = app.made(&tenant.key, "/environments").await?;
    let session = app.made(&tenant.key, &format!("/environments/{env}/sessions")).await?;
    let own = format!("young bytes of {env}").into_bytes();
    put_file(&app, &tenant.key, &env, "/workspace/own.txt", &own).await?;
    model.push(Reply::text("done"));
    completed_run(&app, &tenant.key, &env, &session).await?;
    let (status, _) = send(app.v1(&tenant.key, Method::DELETE, &format!("/environments/{env}"))).await?;
    assert_eq!(status, StatusCode::ACCEPTED);

    // Now: another environment's checkpoint could be relying on a blob this young.
    let report = agentplane_api::jobs::purge_environments_once(&app.app, agentplane_api::edge::now()).await?;
    assert_eq!(report.environments, 1, "{report:?}");
    assert_eq!((report.blobs_deleted, report.manifests_deleted), (0, 0), "{report:?}");
    assert!(report.objects_left >= 2, "{report:?}");
    let bucket = app.store.workspaces()?;
    assert!(bucket.written_at(&blob_key(&sha(&own))).await?.is_some());
    Ok(())
}
