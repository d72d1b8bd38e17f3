//! A sandbox node against the deployed stack: the real `agentplane-node` binary runs as a host
//! process whose only way to Core is the deployed REST API (registration through Core, then its
//! polls, heartbeats and reports through the node routes' functions). Through the deployed
//! functions it then runs a sandbox process, a Platform Run that writes a file (its diff and
//! checkpoint), and that Run's rollback (the file gone again).
//!
//! `AGENTPLANE_DEPLOY_NODE` names the daemon's binary (tests/run.sh keeps the one its test build
//! made); without it these steps say so and are skipped.

use std::process::Stdio;
use std::time::Duration;

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::send;
use base64::Engine;
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};

use super::{R, Stack, Tenant, created, wait_for};

impl Stack {
    fn sandbox(&self, key: &str, method: Method, path: &str) -> RequestBuilder {
        self.request(method, &format!("/sandbox/v1{path}")).header("X-API-Key", key)
    }
}

/// The daemon as a child process; killed when dropped.
pub(super) struct Daemon {
    child: tokio::process::Child,
    state_dir: std::path::PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.state_dir);
    }
}

/// Registers a node through Core and starts the daemon pointed at the deployed API; waits
/// until Core reads it online. `None` when no daemon binary is named.
pub(super) async fn start(s: &Stack) -> anyhow::Result<Option<Daemon>> {
    let Some(binary) = std::env::var_os("AGENTPLANE_DEPLOY_NODE") else {
        eprintln!("AGENTPLANE_DEPLOY_NODE is not set: the node-backed steps are skipped");
        return Ok(None);
    };
    anyhow::ensure!(std::path::Path::new(&binary).is_file(), "no node daemon at {binary:?}");
    let node =
        created(s.core(Method::POST, "/core/v1/sandbox/nodes").json(&json!({"name": "smoke"})), "node")
            .await?;
    let id = node["id"].as_str().unwrap_or_default().to_owned();
    let token = node["token"].as_str().unwrap_or_default().to_owned();
    // Under /tmp: each sandbox's unprivileged uid must be able to traverse it.
    let state_dir = std::path::PathBuf::from(format!("/tmp/agentplane-smoke-node-{}", std::process::id()));
    let log = std::fs::File::create(std::env::temp_dir().join("agentplane-smoke-node.log"))?;
    let child = tokio::process::Command::new(&binary)
        .env("AGENTPLANE_CORE_URL", &s.api)
        .env("AGENTPLANE_NODE_TOKEN", &token)
        .env("AGENTPLANE_NODE_STATE_DIR", &state_dir)
        .env("AGENTPLANE_NODE_HEARTBEAT_S", "2")
        .env("AGENTPLANE_NODE_DISK_MB", "512")
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()?;
    let daemon = Daemon { child, state_dir };
    wait_for("the node comes online through the deployed API", Duration::from_secs(60), async || {
        let (_, got) = send(s.core(Method::GET, &format!("/core/v1/sandbox/nodes/{id}"))).await.ok()?;
        (got["online"] == true && got["connection_id"].is_string()).then_some(())
    })
    .await?;
    Ok(Some(daemon))
}

/// A sandbox on the node, a process in it, its output and exit code read back.
pub(super) async fn sandbox_process(s: &Stack, t: &Tenant) -> R {
    let (status, sandbox) =
        send(s.sandbox(&t.key, Method::POST, "/sandboxes").json(&json!({"timeout": 120}))).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "sandbox: {status} {sandbox}");
    let sandbox = sandbox["sandboxID"].as_str().unwrap_or_default().to_owned();
    let (status, started) = send(
        s.sandbox(&t.key, Method::POST, &format!("/sandboxes/{sandbox}/processes"))
            .json(&json!({"cmd": "sh", "args": ["-c", "echo hello from the node; exit 7"]})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::OK, "process: {status} {started}");
    let id = started["processId"].as_str().unwrap_or_default().to_owned();
    let process = wait_for("the process exits", Duration::from_secs(60), async || {
        let (_, listed) =
            send(s.sandbox(&t.key, Method::GET, &format!("/sandboxes/{sandbox}/processes?state=all")))
                .await
                .ok()?;
        listed["processes"]
            .as_array()?
            .iter()
            .find(|p| p["processId"] == id && p["state"] == "exited")
            .cloned()
    })
    .await?;
    assert_eq!(process["exitCode"], 7, "{process}");
    let (status, output) =
        send(s.sandbox(&t.key, Method::GET, &format!("/sandboxes/{sandbox}/processes/{id}/output"))).await?;
    assert_eq!(status, StatusCode::OK, "{output}");
    let stdout: Vec<u8> = output["chunks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["stream"] == "stdout")
        .filter_map(|c| base64::engine::general_purpose::STANDARD.decode(c["data"].as_str()?).ok())
        .flatten()
        .collect();
    assert_eq!(String::from_utf8_lossy(&stdout), "hello from the node\n");
    let (status, body) = send(s.sandbox(&t.key, Method::DELETE, &format!("/sandboxes/{sandbox}"))).await?;
    assert!(status.is_success(), "kill: {status} {body}");
    Ok(())
}

/// A file's body as the REST API answered it. The function answers the bytes base64-encoded
/// with `isBase64Encoded` (lambda_http's way for `application/octet-stream`), which API Gateway
/// decodes for the API's `BinaryMediaTypes`; LocalStack 4.9's buffered REST API passes the
/// base64 text through instead, so the bytes are read back from it here.
fn rest_api_body(body: Vec<u8>) -> Vec<u8> {
    std::str::from_utf8(&body)
        .ok()
        .filter(|text| !text.is_empty())
        .and_then(|text| base64::engine::general_purpose::STANDARD.decode(text.trim()).ok())
        .unwrap_or(body)
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|x| format!("{x:02x}")).collect()
}

/// A Platform Run whose model writes a file: completed with that file as its diff and a ready
/// checkpoint; the file read back; then the Run rolled back and the file gone.
pub(super) async fn platform_run_diff_and_rollback(s: &Stack, t: &Tenant, model: &ScriptedModel) -> R {
    let env = created(s.v1(&t.key, Method::POST, "/environments").json(&json!({})), "environment").await?;
    let env = env["data"]["id"].as_str().unwrap_or_default().to_owned();
    let session = created(
        s.v1(&t.key, Method::POST, &format!("/environments/{env}/sessions")).json(&json!({})),
        "session",
    )
    .await?;
    let session = session["data"]["id"].as_str().unwrap_or_default().to_owned();
    // Bytes that are no UTF-8 through the REST API both ways, before the Run: its start
    // checkpoint holds them, so the rollback keeps them.
    let binary: &[u8] = &[0, 159, 146, 150, 255, b'\n'];
    let bin_file = format!("/environments/{env}/files?path=/workspace/bytes.bin");
    let response = s
        .v1(&t.key, Method::PUT, &bin_file)
        .header("content-type", "application/octet-stream")
        .body(binary.to_vec())
        .send()
        .await?;
    anyhow::ensure!(response.status().is_success(), "put bytes: {}", response.status());
    let read_bytes = async || -> anyhow::Result<(StatusCode, Vec<u8>)> {
        let response = s.v1(&t.key, Method::GET, &bin_file).send().await?;
        Ok((response.status(), rest_api_body(response.bytes().await?.to_vec())))
    };
    assert_eq!(read_bytes().await?, (StatusCode::OK, binary.to_vec()), "bytes through the REST API");
    let content = "written through the deployed stack\n";
    model.push(Reply::tool("w1", "write_file", &json!({"path": "/workspace/smoke.txt", "content": content})));
    model.push(Reply::text("Wrote it."));
    let runs = format!("/environments/{env}/sessions/{session}/runs");
    let (status, run) = send(
        s.v1(&t.key, Method::POST, &runs).json(&json!({"model": "gpt-platform", "input": "Write the file"})),
    )
    .await?;
    anyhow::ensure!(status == StatusCode::ACCEPTED, "run: {status} {run}");
    let id = run["data"]["id"].as_str().unwrap_or_default().to_owned();
    let path = format!("{runs}/{id}");
    let done = wait_for("the Run completes on the node", Duration::from_secs(120), async || {
        let (_, got) = send(s.v1(&t.key, Method::GET, &path)).await.ok()?;
        let status = got.pointer("/data/status").and_then(Value::as_str)?;
        let diff_ready = got.pointer("/data/fileDiffStatus").and_then(Value::as_str) != Some("pending");
        (matches!(status, "completed" | "failed" | "stopped") && diff_ready).then_some(got)
    })
    .await?;
    let data = &done["data"];
    assert_eq!(data["status"], "completed", "{done}");
    assert_eq!(data["output"], "Wrote it.");
    assert_eq!(data["fileDiffStatus"], "ready", "{done}");
    assert_eq!(
        data["fileDiff"],
        json!([{"path": "/workspace/smoke.txt", "kind": "added", "afterSha256": sha256(content.as_bytes())}]),
        "{done}"
    );
    assert_eq!(data["checkpoint"]["status"], "ready", "{done}");
    let file = format!("/environments/{env}/files?path=/workspace/smoke.txt");
    let response = s.v1(&t.key, Method::GET, &file).send().await?;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(rest_api_body(response.bytes().await?.to_vec()), content.as_bytes());

    // The rollback: DELETE of the Run, `reverting`, then `reverted` by rollback-restore, which
    // restores the Run's start checkpoint on the node: the file is gone.
    let (status, body) = send(s.v1(&t.key, Method::DELETE, &path)).await?;
    anyhow::ensure!(status == StatusCode::ACCEPTED, "rollback: {status} {body}");
    wait_for("the Run is reverted", Duration::from_secs(120), async || {
        let (_, got) = send(s.v1(&t.key, Method::GET, &path)).await.ok()?;
        (got.pointer("/data/status").and_then(Value::as_str)? == "reverted").then_some(())
    })
    .await?;
    let response = s.v1(&t.key, Method::GET, &file).send().await?;
    assert_eq!(response.status(), StatusCode::NOT_FOUND, "the rolled-back Run's file is still there");
    assert_eq!(
        read_bytes().await?,
        (StatusCode::OK, binary.to_vec()),
        "the rollback kept what came before the Run"
    );
    Ok(())
}
