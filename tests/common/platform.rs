//! Platform API (`/v1`) steps the Run tests share: a workspace file read, a Run created, a Run
//! waited for.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{TestApp, send};

/// `GET …/files?path=` of `env`: its status and body.
pub async fn file(app: &TestApp, key: &str, env: &str, path: &str) -> anyhow::Result<(StatusCode, String)> {
    let response = app.v1(key, Method::GET, &format!("/environments/{env}/files?path={path}")).send().await?;
    Ok((response.status(), response.text().await?))
}

/// Creates a Run (`model: "m"`) in `session` of `env`; its path.
pub async fn run(app: &TestApp, key: &str, env: &str, session: &str, input: &str) -> anyhow::Result<String> {
    let base = format!("/environments/{env}/sessions/{session}/runs");
    let (status, body) =
        send(app.v1(key, Method::POST, &base).json(&json!({"model": "m", "input": input}))).await?;
    anyhow::ensure!(status == StatusCode::ACCEPTED, "{body}");
    Ok(format!("{base}/{}", body["data"]["id"].as_str().unwrap_or_default()))
}

/// Reads the Run at `path` every 100 ms until `done` holds for it (its `data`), within `within`.
pub async fn wait(
    app: &TestApp,
    key: &str,
    path: &str,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let started = Instant::now();
    loop {
        let (status, body) = send(app.v1(key, Method::GET, path)).await?;
        anyhow::ensure!(status == StatusCode::OK, "{body}");
        if done(&body["data"]) {
            return Ok(body["data"].clone());
        }
        anyhow::ensure!(started.elapsed() < within, "never got there: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether a Run's `data` reads as ended.
pub fn ended(run: &Value) -> bool {
    matches!(run["status"].as_str(), Some("completed" | "failed" | "stopped" | "reverted"))
}
