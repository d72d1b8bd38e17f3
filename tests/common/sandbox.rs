//! Sandbox tests' harness: an embedded node daemon (the same code as `agentplane-node`) runs
//! each test's sandboxes under bubblewrap and cgroups on this host, driven through the E2B API.
// Test harness: a failed expectation should fail the test right there.
#![allow(clippy::expect_used)]

use std::time::Duration;

use base64::Engine;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::{Tenant, TestApp, TestNode, send, str_field};

/// A test app, a node on this host and a tenant: what every sandbox test starts from.
pub struct Env {
    pub app: TestApp,
    pub node: TestNode,
    pub tenant: Tenant,
}

pub async fn env() -> Env {
    env_with(|app| app).await
}

/// [`env`] with the app configured by `configure` (caps, say).
pub async fn env_with(configure: impl FnOnce(agentplane_api::App) -> agentplane_api::App) -> Env {
    agentplane_api::logs::init_local_tracing();
    let app = TestApp::spawn_with(configure).await.expect("app");
    let node = TestNode::start(&app).await.expect("node");
    let tenant = app.tenant().await.expect("tenant");
    Env { app, node, tenant }
}

impl Env {
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self.app.sandbox(&self.tenant.key, method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        send(request).await.expect("request")
    }

    pub async fn create(&self, body: Value) -> String {
        let (status, created) = self.call(Method::POST, "/sandboxes", Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        str_field(&created, "sandboxID").expect("sandboxID")
    }

    pub async fn start(&self, sandbox: &str, body: Value) -> (String, u64) {
        let (status, started) =
            self.call(Method::POST, &format!("/sandboxes/{sandbox}/processes"), Some(body)).await;
        assert_eq!(status, StatusCode::OK, "{started}");
        let pid = started["pid"].as_u64().expect("pid");
        (str_field(&started, "processId").expect("processId"), pid)
    }

    pub async fn processes(&self, sandbox: &str, state: &str) -> Vec<Value> {
        let (status, body) =
            self.call(Method::GET, &format!("/sandboxes/{sandbox}/processes?state={state}"), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["processes"].as_array().cloned().expect("processes")
    }

    pub async fn process(&self, sandbox: &str, id: &str) -> Value {
        self.processes(sandbox, "all").await.into_iter().find(|p| p["processId"] == id).unwrap_or(Value::Null)
    }

    /// Waits until the process is no longer running (or `what` holds).
    pub async fn wait_for(&self, sandbox: &str, id: &str, what: impl Fn(&Value) -> bool) -> Value {
        // Generous: a loaded CI host is slow, not wrong.
        for _ in 0..600 {
            let p = self.process(sandbox, id).await;
            if what(&p) {
                return p;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{id} never reached the expected state: {}", self.process(sandbox, id).await);
    }

    pub async fn wait_exit(&self, sandbox: &str, id: &str) -> Value {
        self.wait_for(sandbox, id, |p| p["state"] == "exited").await
    }

    /// How many output chunks are retained for the process.
    pub async fn chunk_count(&self, sandbox: &str, id: &str) -> usize {
        self.output_pages(sandbox, id).await.iter().map(|b| b["chunks"].as_array().map_or(0, Vec::len)).sum()
    }

    /// Every page of the process's retained output, in order.
    pub async fn output_pages(&self, sandbox: &str, id: &str) -> Vec<Value> {
        let mut pages = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let query = cursor.as_ref().map(|c| format!("?cursor={c}")).unwrap_or_default();
            let (status, body) = self
                .call(Method::GET, &format!("/sandboxes/{sandbox}/processes/{id}/output{query}"), None)
                .await;
            assert_eq!(status, StatusCode::OK, "{body}");
            cursor = body["cursor"].as_str().map(str::to_owned);
            let more = body["hasMore"] == true;
            pages.push(body);
            if !more {
                return pages;
            }
        }
    }

    /// (stdout, stderr, last body) of all retained output.
    pub async fn output(&self, sandbox: &str, id: &str) -> (Vec<u8>, Vec<u8>, Value) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut pages = self.output_pages(sandbox, id).await;
        for body in &pages {
            for chunk in body["chunks"].as_array().expect("chunks") {
                assert!(chunk["timestamp"].as_i64().expect("ms") > 1_600_000_000_000);
                let data = base64::engine::general_purpose::STANDARD
                    .decode(chunk["data"].as_str().expect("data"))
                    .expect("base64");
                match chunk["stream"].as_str() {
                    Some("stdout") => out.extend(data),
                    Some("stderr") => err.extend(data),
                    other => panic!("stream {other:?}"),
                }
            }
        }
        (out, err, pages.pop().unwrap_or_default())
    }

    pub async fn kill(&self, sandbox: &str) {
        let (status, body) = self.call(Method::DELETE, &format!("/sandboxes/{sandbox}"), None).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
        // Give the node a moment to tear the sandbox down (workspace and cgroup); generous, as a
        // loaded host is slow.
        for _ in 0..500 {
            let cgroup_gone = ["freezer", "memory", "cpu"]
                .iter()
                .all(|c| !std::path::Path::new(&format!("/sys/fs/cgroup/{c}/agentplane/{sandbox}")).exists());
            if cgroup_gone && !self.node.config.state_dir.join("sandboxes").join(sandbox).exists() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the node did not remove {sandbox}'s workspace and cgroup");
    }
}

#[track_caller]
#[allow(clippy::needless_pass_by_value)]
pub fn assert_e2b(actual: (StatusCode, Value), status: StatusCode) {
    assert_eq!(actual.0, status, "body: {}", actual.1);
    assert_eq!(actual.1["code"], status.as_u16(), "body: {}", actual.1);
    assert!(actual.1["message"].is_string(), "body: {}", actual.1);
}

/// A process that ran to its end: its exit code and everything it wrote.
#[derive(Debug)]
pub struct Finished {
    pub exit_code: Option<i64>,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    pub fn failed(&self) -> bool {
        self.exit_code != Some(0)
    }
}

impl Env {
    /// Runs `script` with `sh -c` in the sandbox and waits for its end.
    pub async fn run(&self, sandbox: &str, script: &str) -> Finished {
        let (id, _) = self.start(sandbox, serde_json::json!({"cmd": "sh", "args": ["-c", script]})).await;
        let exited = self.wait_exit(sandbox, &id).await;
        let (out, err, _) = self.output(sandbox, &id).await;
        Finished {
            exit_code: exited["exitCode"].as_i64(),
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        }
    }
}
