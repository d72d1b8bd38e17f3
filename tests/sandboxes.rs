//! The sandbox API against real processes: an embedded node daemon (the same code as
//! `agentplane-node`) runs each test's sandboxes under bubblewrap and cgroups on this host.

use std::time::Duration;

use agentplane_tests::{Tenant, TestApp, TestNode, send, str_field};
use base64::Engine;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

struct Env {
    app: TestApp,
    node: TestNode,
    tenant: Tenant,
}

async fn env() -> Env {
    agentplane_api::lambda::init_local_tracing();
    let app = TestApp::spawn().await.expect("app");
    let node = TestNode::start(&app).await.expect("node");
    let tenant = app.tenant().await.expect("tenant");
    Env { app, node, tenant }
}

impl Env {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self.app.sandbox(&self.tenant.key, method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        send(request).await.expect("request")
    }

    async fn create(&self, body: Value) -> String {
        let (status, created) = self.call(Method::POST, "/sandboxes", Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        str_field(&created, "sandboxID").expect("sandboxID")
    }

    async fn start(&self, sandbox: &str, body: Value) -> (String, u64) {
        let (status, started) =
            self.call(Method::POST, &format!("/sandboxes/{sandbox}/processes"), Some(body)).await;
        assert_eq!(status, StatusCode::OK, "{started}");
        let pid = started["pid"].as_u64().expect("pid");
        (str_field(&started, "processId").expect("processId"), pid)
    }

    async fn processes(&self, sandbox: &str, state: &str) -> Vec<Value> {
        let (status, body) =
            self.call(Method::GET, &format!("/sandboxes/{sandbox}/processes?state={state}"), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["processes"].as_array().cloned().expect("processes")
    }

    async fn process(&self, sandbox: &str, id: &str) -> Value {
        self.processes(sandbox, "all").await.into_iter().find(|p| p["processId"] == id).unwrap_or(Value::Null)
    }

    /// Waits until the process is no longer running (or `what` holds).
    async fn wait_for(&self, sandbox: &str, id: &str, what: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..200 {
            let p = self.process(sandbox, id).await;
            if what(&p) {
                return p;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{id} never reached the expected state: {}", self.process(sandbox, id).await);
    }

    async fn wait_exit(&self, sandbox: &str, id: &str) -> Value {
        self.wait_for(sandbox, id, |p| p["state"] == "exited").await
    }

    /// (stdout, stderr, last body) of all retained output.
    async fn output(&self, sandbox: &str, id: &str) -> (Vec<u8>, Vec<u8>, Value) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut cursor: Option<String> = None;
        loop {
            let query = cursor.as_ref().map(|c| format!("?cursor={c}")).unwrap_or_default();
            let (status, body) = self
                .call(Method::GET, &format!("/sandboxes/{sandbox}/processes/{id}/output{query}"), None)
                .await;
            assert_eq!(status, StatusCode::OK, "{body}");
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
            if body["hasMore"] != true {
                return (out, err, body);
            }
            cursor = body["cursor"].as_str().map(str::to_owned);
        }
    }

    async fn kill(&self, sandbox: &str) {
        let (status, body) = self.call(Method::DELETE, &format!("/sandboxes/{sandbox}"), None).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
        // Give the node a moment to tear the sandbox down (workspace and cgroup).
        for _ in 0..100 {
            if !self.node.config.state_dir.join("sandboxes").join(sandbox).exists() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the node did not remove {sandbox}'s workspace");
    }
}

#[track_caller]
fn assert_e2b(actual: (StatusCode, Value), status: StatusCode) {
    assert_eq!(actual.0, status, "body: {}", actual.1);
    assert_eq!(actual.1["code"], status.as_u16(), "body: {}", actual.1);
    assert!(actual.1["message"].is_string(), "body: {}", actual.1);
}

#[tokio::test]
async fn echo_to_both_streams_is_captured_with_its_witnessed_exit_code() {
    let env = env().await;
    let sandbox =
        env.create(json!({"timeout": 120, "metadata": {"who": "test"}, "envVars": {"GREETING": "hi"}})).await;
    let (id, pid) = env
        .start(
            &sandbox,
            json!({"cmd": "sh", "args": ["-c", "echo $GREETING $EXTRA; pwd; echo oops >&2; exit 3"],
                   "envs": {"EXTRA": "there"}, "cwd": "/workspace", "tag": "greeter"}),
        )
        .await;
    assert_eq!(id, "obs-1");
    assert!(pid > 1, "a pid inside the sandbox: {pid}");
    let p = env.wait_exit(&sandbox, &id).await;
    assert_eq!(p["exitCode"], 3);
    assert_eq!(p["observed"], true);
    assert_eq!(p["observationGap"], false);
    assert_eq!(p["outputTruncated"], false);
    assert_eq!(p["pty"], false);
    assert_eq!(p["tag"], "greeter");
    assert_eq!(p["pid"], pid);
    assert_eq!(p["config"]["cmd"], "sh");
    assert!(p["exitedAt"].is_string() && p["startedAt"].is_string(), "{p}");
    let (out, err, body) = env.output(&sandbox, &id).await;
    assert_eq!(String::from_utf8_lossy(&out), "hi there\n/workspace\n");
    assert_eq!(String::from_utf8_lossy(&err), "oops\n");
    assert_eq!(body["truncated"], false);
    // Listing filters: gone from live, present in exited.
    assert!(env.processes(&sandbox, "live").await.is_empty());
    assert_eq!(env.processes(&sandbox, "exited").await.len(), 1);
    env.kill(&sandbox).await;
}
