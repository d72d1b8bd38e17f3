//! The sandbox bench (`bash tests/bench.sh` runs it after the sessions bench): real processes
//! in a sandbox of an embedded node, through the full router over HTTP on loopback.
//!
//! - process start latency: from the start request to the answer (the process is running and
//!   its pid is known), p50/p99;
//! - output throughput: MB/s from the start request until all of a large output has been
//!   captured (the exit is recorded after the last chunk), with the retention limits checked;
//! - the cost of listing 256 retained observations, p50/p99;
//! - session create with managed compute (`openai_hosted`: a sandbox placed on the node before
//!   the answer) next to a session without (`none`), p50/p99;
//! - the real e2b SDK (tests/bench/e2b_sdk.py, with `AGENTPLANE_TOOLS_PYTHON` or the test
//!   tools' Python): `commands.run("true")` round trip through the node's envd, and
//!   `Sandbox.create()` to the first command's return, p50/p99.

#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use agentplane_tests::{TestApp, TestNode, send, str_field};
use base64::Engine;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0;
    (at(0.50), at(0.99))
}

struct Bench {
    app: TestApp,
    key: String,
    project: agentplane_domain::ProjectId,
}

impl Bench {
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let mut request = self.app.sandbox(&self.key, method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        send(request).await
    }

    async fn start(&self, sandbox: &str, body: Value) -> anyhow::Result<String> {
        let (status, started) =
            self.call(Method::POST, &format!("/sandboxes/{sandbox}/processes"), Some(body)).await?;
        anyhow::ensure!(status == StatusCode::OK, "start: {status} {started}");
        str_field(&started, "processId")
    }

    async fn processes(&self, sandbox: &str) -> anyhow::Result<Vec<Value>> {
        let (status, body) =
            self.call(Method::GET, &format!("/sandboxes/{sandbox}/processes?state=all"), None).await?;
        anyhow::ensure!(status == StatusCode::OK, "list: {status} {body}");
        Ok(body["processes"].as_array().cloned().unwrap_or_default())
    }

    async fn wait_exit(&self, sandbox: &str, id: &str) -> anyhow::Result<Value> {
        for _ in 0..6000 {
            if let Some(p) = self
                .processes(sandbox)
                .await?
                .into_iter()
                .find(|p| p["processId"] == id && p["state"] == "exited")
            {
                return Ok(p);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        anyhow::bail!("{id} did not exit")
    }

    async fn sandbox(&self) -> anyhow::Result<String> {
        let (status, body) = self.call(Method::POST, "/sandboxes", Some(json!({"timeout": 3600}))).await?;
        anyhow::ensure!(status == StatusCode::CREATED, "create: {status} {body}");
        str_field(&body, "sandboxID")
    }

    /// Kills and waits until the node has torn the sandbox down.
    /// Creates a session in `mode` (checking that an openai_hosted one got its compute), deletes
    /// it, and returns how long the create took.
    async fn session(&self, mode: &str) -> anyhow::Result<Duration> {
        let t = Instant::now();
        let (status, body) = send(
            self.app.client(&self.key, Method::POST, "/sessions").json(&json!({ "environment_mode": mode })),
        )
        .await?;
        let took = t.elapsed();
        anyhow::ensure!(status == StatusCode::CREATED, "create {mode}: {status} {body}");
        let id = str_field(&body, "id")?;
        if mode == "openai_hosted" {
            let allocation = self.app.store.allocations().get(&self.project, &id.parse()?).await?;
            anyhow::ensure!(allocation.is_some_and(|a| a.sandbox_id.is_some()), "not placed");
        }
        let (status, _) =
            send(self.app.client(&self.key, Method::DELETE, &format!("/sessions/{id}"))).await?;
        anyhow::ensure!(status == StatusCode::OK, "delete: {status}");
        Ok(took)
    }

    async fn kill(&self, node: &TestNode, sandbox: &str) -> anyhow::Result<()> {
        self.call(Method::DELETE, &format!("/sandboxes/{sandbox}"), None).await?;
        for _ in 0..500 {
            if !node.config.state_dir.join("sandboxes").join(sandbox).exists() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        anyhow::bail!("the node did not tear {sandbox} down")
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    agentplane_api::logs::init_local_tracing();
    let n: usize = std::env::var("BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let app = TestApp::spawn().await?;
    let node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let bench = Bench { app, key: tenant.key, project: tenant.project_id.parse()? };

    // 1. Process start latency.
    let sandbox = bench.sandbox().await?;
    for _ in 0..5 {
        bench.start(&sandbox, json!({"cmd": "true"})).await?;
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        bench.start(&sandbox, json!({"cmd": "true"})).await?;
        samples.push(t.elapsed());
    }
    let (p50, p99) = percentiles(samples);
    println!("process start (request → running, pid known)   n={n:<4} p50 {p50:7.1} ms   p99 {p99:7.1} ms");
    bench.kill(&node, &sandbox).await?;

    // 2. Output throughput, with the retention limits holding.
    let sandbox = bench.sandbox().await?;
    let bytes: u64 = 16 * 1024 * 1024;
    let t = Instant::now();
    let id =
        bench.start(&sandbox, json!({"cmd": "head", "args": ["-c", bytes.to_string(), "/dev/zero"]})).await?;
    let exited = bench.wait_exit(&sandbox, &id).await?;
    let elapsed = t.elapsed();
    let (status, output) =
        bench.call(Method::GET, &format!("/sandboxes/{sandbox}/processes/{id}/output"), None).await?;
    anyhow::ensure!(status == StatusCode::OK, "output: {status}");
    let chunks = output["chunks"].as_array().cloned().unwrap_or_default();
    let retained: usize = chunks
        .iter()
        .filter_map(|c| c["data"].as_str())
        .map(|d| base64::engine::general_purpose::STANDARD.decode(d).map(|b| b.len()).unwrap_or(0))
        .sum();
    println!(
        "output captured                                 {:.1} MiB in {:.2} s = {:6.1} MB/s   retained {} chunks, {:.2} MiB, truncated={} (limits 1024 chunks / 1 MiB)",
        bytes as f64 / (1024.0 * 1024.0),
        elapsed.as_secs_f64(),
        bytes as f64 / 1e6 / elapsed.as_secs_f64(),
        chunks.len(),
        retained as f64 / (1024.0 * 1024.0),
        exited["outputTruncated"],
    );
    anyhow::ensure!(chunks.len() <= 1024 && retained <= 1024 * 1024, "retention limits broken");
    bench.kill(&node, &sandbox).await?;

    // 3. Listing 256 retained observations (more were started; the oldest were dropped).
    let sandbox = bench.sandbox().await?;
    let mut last = String::new();
    for _ in 0..270 {
        last = bench.start(&sandbox, json!({"cmd": "echo", "args": ["x"]})).await?;
    }
    bench.wait_exit(&sandbox, &last).await?;
    let listed = bench.processes(&sandbox).await?.len();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let got = bench.processes(&sandbox).await?;
        samples.push(t.elapsed());
        anyhow::ensure!(got.len() == listed, "listing changed");
    }
    let (p50, p99) = percentiles(samples);
    println!(
        "list processes?state=all ({listed} observations)     n={n:<4} p50 {p50:7.1} ms   p99 {p99:7.1} ms"
    );
    bench.kill(&node, &sandbox).await?;

    // 4. Session create, with and without managed compute (each session deleted again).
    let m = (n / 4).max(10);
    let (mut plain, mut hosted) = (Vec::with_capacity(m), Vec::with_capacity(m));
    for _ in 0..m {
        plain.push(bench.session("none").await?);
        hosted.push(bench.session("openai_hosted").await?);
    }
    for (mode, samples) in [("none", plain), ("openai_hosted", hosted)] {
        let (p50, p99) = percentiles(samples);
        println!("POST /sessions environment_mode={mode:<14} n={m:<4} p50 {p50:7.1} ms   p99 {p99:7.1} ms");
    }

    // 5. The e2b SDK: commands through envd, and create to first command.
    e2b_sdk(&bench, &node, n).await?;
    drop(node);
    Ok(())
}

async fn e2b_sdk(bench: &Bench, node: &TestNode, n: usize) -> anyhow::Result<()> {
    let python = std::env::var("AGENTPLANE_TOOLS_PYTHON")
        .unwrap_or_else(|_| format!("{}/../../.localstack/tools/bin/python", env!("CARGO_MANIFEST_DIR")));
    let script = format!("{}/e2b_sdk.py", env!("CARGO_MANIFEST_DIR"));
    let vars = [
        ("E2B_API_URL", format!("{}/sandbox/v1", bench.app.base)),
        ("E2B_API_KEY", bench.key.clone()),
        ("E2B_SANDBOX_URL", node.envd_url.clone()),
        ("BENCH_N", n.to_string()),
    ];
    let output = tokio::process::Command::new(&python)
        .arg(script)
        .envs(vars)
        .env_remove("E2B_DOMAIN")
        .env_remove("E2B_DEBUG")
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        println!("e2b SDK bench skipped ({python}): {}", String::from_utf8_lossy(&output.stderr).trim());
        return Ok(());
    }
    let seen: Value = serde_json::from_str(stdout.trim().lines().last().unwrap_or_default())?;
    for (key, label) in [
        ("run_true", "e2b SDK commands.run(\"true\") round trip       "),
        ("create_to_first", "e2b SDK Sandbox.create() → first command done "),
    ] {
        let samples: Vec<Duration> = seen[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_f64)
            .map(|ms| Duration::from_secs_f64(ms / 1000.0))
            .collect();
        let count = samples.len();
        let (p50, p99) = percentiles(samples);
        println!("{label} n={count:<4} p50 {p50:7.1} ms   p99 {p99:7.1} ms");
    }
    Ok(())
}
