//! The Platform Runs bench (`bash tests/bench.sh runs`): checkpoints and restores of a real
//! sandbox's workspace on an embedded node against LocalStack, and rollback latency through the
//! full router over HTTP on loopback.
//!
//! - checkpoint time against workspace size (100, 1,000, 10,000 files; 1 MB and 100 MB in all):
//!   the first checkpoint (every blob looked up and uploaded), then, as a Run's end checkpoint
//!   does (its start manifest's blobs known), one with nothing changed and one with one file
//!   changed, with the bytes each uploaded;
//! - restore time back to the first checkpoint after 10% of the files were deleted and one
//!   changed;
//! - rollback latency: DELETE of a completed Run → `reverted` (polled every 20 ms), p50/max;
//! - a rollback across 2 sessions × 5 Runs (the 2nd Run's: 9 Runs affected), DELETE → all
//!   `reverted`.
//!
//! `BENCH_RUNS_SIZES` narrows the sizes (`100x1,1000x100`: files x MB in all); `BENCH_N` sets the
//! rollbacks measured (default 10).

#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use agentplane_domain::sandbox::ProcessConfig;
use agentplane_domain::sandbox::command::Command;
use agentplane_engine::platform::checkpoint;
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, TestNode, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn v1(app: &TestApp, key: &str, method: Method, path: &str) -> reqwest::RequestBuilder {
    app.request(method, &format!("/v1{path}")).bearer_auth(key)
}

async fn made(app: &TestApp, key: &str, path: &str) -> anyhow::Result<String> {
    let (status, body) = send(v1(app, key, Method::POST, path).json(&json!({}))).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "{path}: {body}");
    Ok(body["data"]["id"].as_str().unwrap_or_default().to_owned())
}

/// Runs `script` with bash in the sandbox and waits for its exit.
async fn inside(
    app: &TestApp,
    sandbox: &agentplane_domain::sandbox::Sandbox,
    script: &str,
) -> anyhow::Result<()> {
    let number = app.store.sandboxes().next_process_number(&sandbox.id, agentplane_api::edge::now()).await?;
    let command = Command::StartProcess {
        sandbox_id: sandbox.id.clone(),
        number,
        config: ProcessConfig {
            cmd: "bash".into(),
            args: vec!["-c".into(), script.into()],
            envs: Default::default(),
            cwd: Some("/workspace".into()),
        },
        tag: None,
    };
    agentplane_engine::dispatch::run(&app.app.store, &sandbox.node_id, command).await?;
    let id = agentplane_domain::sandbox::ProcessId::Observed(number);
    let started = Instant::now();
    loop {
        if let Ok(record) = app.store.observations().process(&sandbox.id, id).await
            && record.state != agentplane_domain::sandbox::ProcessState::Running
        {
            anyhow::ensure!(record.exit_code == Some(0), "the script failed: {record:?}");
            return Ok(());
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(600), "the script never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

async fn checkpoints(
    app: &TestApp,
    key: &str,
    project: agentplane_domain::ProjectId,
    files: usize,
    total_mb: usize,
) -> anyhow::Result<()> {
    let env = made(app, key, "/environments").await?;
    let (status, _) = send(
        v1(app, key, Method::PUT, &format!("/environments/{env}/files?path=/workspace/start.txt"))
            .body("start"),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::OK, "{status}");
    let environment = app.store.environments().get(&project, &env.parse()?).await?;
    let sandbox = agentplane_engine::platform::workspace::sandbox(
        &agentplane_api::platform::platform(&app.app),
        &environment,
    )
    .await?;
    let size = total_mb * 1_048_576 / files;
    let made_at = Instant::now();
    inside(
        app,
        &sandbox,
        &format!(
            "rm -f start.txt; for d in $(seq 0 $(( ({files} - 1) / 100 ))); do mkdir -p d$d; done; \
             for i in $(seq 0 $(({files} - 1))); do head -c {size} /dev/urandom > d$((i / 100))/f$i; done"
        ),
    )
    .await?;
    let made = made_at.elapsed();
    let t = Instant::now();
    let first = checkpoint::take(&app.app.store, &sandbox, None).await?;
    let full = t.elapsed();
    let t = Instant::now();
    let same = checkpoint::take(&app.app.store, &sandbox, Some(&first.manifest)).await?;
    let unchanged = t.elapsed();
    inside(app, &sandbox, &format!("echo changed-{files}-{total_mb} > d0/f0")).await?;
    let t = Instant::now();
    let one = checkpoint::take(&app.app.store, &sandbox, Some(&first.manifest)).await?;
    let one_changed = t.elapsed();
    inside(
        app,
        &sandbox,
        &format!(
            "for i in $(seq 1 10 $(({files} - 1))); do rm -f d$((i / 100))/f$i; done; echo new > extra.txt"
        ),
    )
    .await?;
    let t = Instant::now();
    let restored = checkpoint::restore(&app.app.store, &sandbox, &first.id).await?;
    let restore = t.elapsed();
    let (_, listed) = send(v1(app, key, Method::GET, &format!("/environments/{env}/files"))).await?;
    let extra = listed["data"].as_array().into_iter().flatten().any(|f| f["path"] == "/workspace/extra.txt");
    anyhow::ensure!(!extra, "the restore left a file the checkpoint does not have");
    println!(
        "{files:>6} files {total_mb:>4} MB | first {:>7.2} s ({:>4} blobs, {:>6.1} MB) | unchanged {:>6.2} s ({} blobs) | \
         one changed {:>6.2} s ({} blob, {} B, manifest new: {}) | restore {:>6.2} s (removed {}, fetched {}) | made in {:.1} s",
        secs(full),
        first.uploaded,
        mb(first.bytes),
        secs(unchanged),
        same.uploaded,
        secs(one_changed),
        one.uploaded,
        one.bytes,
        one.manifest_written,
        secs(restore),
        restored.get("removed").map_or("?", String::as_str),
        restored.get("fetched").map_or("?", String::as_str),
        secs(made),
    );
    agentplane_api::sandbox::sandboxes::end(&app.app, &sandbox).await;
    Ok(())
}

async fn rollbacks(n: usize) -> anyhow::Result<()> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = made(&app, &tenant.key, "/environments").await?;
    let mut samples = Vec::new();
    for i in 0..n {
        let session = made(&app, &tenant.key, &format!("/environments/{env}/sessions")).await?;
        model.push(Reply::tool("w", "write_file", &json!({"path": format!("f{i}.txt"), "content": "x"})));
        model.push(Reply::text("done"));
        let (_, created) = send(
            v1(&app, &tenant.key, Method::POST, &format!("/environments/{env}/sessions/{session}/runs"))
                .json(&json!({"model": "m", "input": "write"})),
        )
        .await?;
        let path = format!(
            "/environments/{env}/sessions/{session}/runs/{}",
            created["data"]["id"].as_str().unwrap_or_default()
        );
        wait(&app, &tenant.key, &path, "completed").await?;
        let t = Instant::now();
        let (status, body) = send(v1(&app, &tenant.key, Method::DELETE, &path)).await?;
        anyhow::ensure!(status == StatusCode::ACCEPTED, "{body}");
        wait(&app, &tenant.key, &path, "reverted").await?;
        samples.push(t.elapsed());
    }
    samples.sort();
    let p50 = samples[samples.len() / 2];
    let max = samples[samples.len() - 1];
    println!(
        "rollback DELETE → reverted ({n} rollbacks, small workspace): p50 {:.0} ms, max {:.0} ms",
        secs(p50) * 1000.0,
        secs(max) * 1000.0
    );
    Ok(())
}

/// Two sessions × `per` Runs created alternately (A1, B1, A2, B2, …), each writing its own
/// file; then a rollback of the second Run (every later Run of both sessions affected):
/// DELETE → every affected Run `reverted`.
async fn rollback_across_sessions(per: usize) -> anyhow::Result<()> {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = made(&app, &tenant.key, "/environments").await?;
    let sessions = [
        made(&app, &tenant.key, &format!("/environments/{env}/sessions")).await?,
        made(&app, &tenant.key, &format!("/environments/{env}/sessions")).await?,
    ];
    let mut paths = Vec::new();
    for i in 0..per * 2 {
        let session = &sessions[i % 2];
        model.push(Reply::tool("w", "write_file", &json!({"path": format!("f{i}.txt"), "content": "x"})));
        model.push(Reply::text("done"));
        let (_, created) = send(
            v1(&app, &tenant.key, Method::POST, &format!("/environments/{env}/sessions/{session}/runs"))
                .json(&json!({"model": "m", "input": "write"})),
        )
        .await?;
        paths.push(format!(
            "/environments/{env}/sessions/{session}/runs/{}",
            created["data"]["id"].as_str().unwrap_or_default()
        ));
    }
    let t = Instant::now();
    for path in &paths {
        wait(&app, &tenant.key, path, "completed").await?;
    }
    let ran = t.elapsed();
    let t = Instant::now();
    let (status, body) = send(v1(&app, &tenant.key, Method::DELETE, &paths[1])).await?;
    anyhow::ensure!(status == StatusCode::ACCEPTED, "{body}");
    for path in &paths[1..] {
        wait(&app, &tenant.key, path, "reverted").await?;
    }
    let took = t.elapsed();
    println!(
        "2 sessions x {per} Runs, one at a time: all completed in {:.1} s; rollback of the 2nd ({} Runs affected) DELETE → all reverted {:.0} ms",
        secs(ran),
        paths.len() - 1,
        secs(took) * 1000.0
    );
    Ok(())
}

async fn wait(app: &TestApp, key: &str, path: &str, status: &str) -> anyhow::Result<Value> {
    let started = Instant::now();
    loop {
        let (_, body) = send(v1(app, key, Method::GET, path)).await?;
        if body["data"]["status"] == status {
            return Ok(body);
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(120), "never {status}: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::var("BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    let sizes: Vec<(usize, usize)> = std::env::var("BENCH_RUNS_SIZES")
        .ok()
        .map(|v| {
            v.split(',')
                .filter_map(|p| p.split_once('x'))
                .filter_map(|(f, m)| Some((f.trim().parse().ok()?, m.trim().parse().ok()?)))
                .collect()
        })
        .unwrap_or_else(|| vec![(100, 1), (1000, 1), (10_000, 1), (100, 100), (1000, 100), (10_000, 100)]);
    println!("Platform Runs: checkpoints (scan + missing blobs + manifest) and restores, LocalStack S3");
    let app = TestApp::spawn().await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    for (files, total) in sizes {
        checkpoints(&app, &tenant.key, tenant.project_id.parse()?, files, total).await?;
    }
    println!();
    rollbacks(n).await?;
    rollback_across_sessions(5).await
}
