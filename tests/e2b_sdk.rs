//! The sandbox lifecycle driven by the real e2b Python SDK (tests/sdk/e2b_python.py): what a
//! user of `Sandbox.create`, `get_info`, `set_timeout`, `Sandbox.list` (paged), `pause`,
//! `Sandbox.connect` and `kill` reads. Commands and files need envd on the node (not yet here).

use agentplane_tests::sandbox::env;
use serde_json::{Value, json};

fn python() -> String {
    std::env::var("AGENTPLANE_TOOLS_PYTHON")
        .unwrap_or_else(|_| format!("{}/../.localstack/tools/bin/python", env!("CARGO_MANIFEST_DIR")))
}

#[tokio::test]
async fn the_e2b_python_sdk_drives_the_sandbox_lifecycle() -> anyhow::Result<()> {
    let env = env().await;
    let script = format!("{}/sdk/e2b_python.py", env!("CARGO_MANIFEST_DIR"));
    let (api, key) = (format!("{}/sandbox/v1", env.app.base), env.tenant.key.clone());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python())
            .arg(script)
            .env("E2B_API_URL", api)
            .env("E2B_API_KEY", key)
            .env_remove("E2B_DOMAIN")
            .env_remove("E2B_DEBUG")
            .output()
    })
    .await??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    anyhow::ensure!(output.status.success(), "the SDK script failed:\n{stdout}\n{stderr}");
    let seen: Value = serde_json::from_str(stdout.trim().lines().last().unwrap_or_default())?;

    let id = seen["create"]["id"].as_str().unwrap_or_default();
    assert!(id.starts_with("sbx_"), "{seen}");
    let token = seen["create"]["token"].as_str().unwrap_or_default();
    assert!(token.len() >= 43, "an envd access token: {seen}");

    let info = &seen["info"];
    assert_eq!(
        (&info["id"], &info["template"], &info["state"]),
        (&json!(id), &json!("base"), &json!("running"))
    );
    assert_eq!(info["envd_version"], "0.5.7");
    assert_eq!(info["metadata"]["role"], "main");
    let lasts = info["end_at"].as_f64().unwrap_or_default() - info["started_at"].as_f64().unwrap_or_default();
    assert!((299.0..=301.0).contains(&lasts), "{info}");

    // set_timeout(900) moves the deadline to 900 s from now; a shorter one is E2B's 400.
    let moved = seen["after_timeout"]["end_at"].as_f64().unwrap_or_default();
    assert!(moved > info["end_at"].as_f64().unwrap_or_default() + 500.0, "{seen}");
    assert!(seen["short_timeout"].as_str().is_some_and(|m| m.contains("900")), "{seen}");

    // Three sandboxes of this run, listed two at a time.
    let pages = seen["pages"].as_array().cloned().unwrap_or_default();
    assert_eq!(pages.len(), 2, "{seen}");
    assert_eq!(pages.iter().map(|p| p.as_array().map_or(0, Vec::len)).collect::<Vec<_>>(), vec![2, 1]);
    assert!(pages.iter().flat_map(|p| p.as_array().cloned().unwrap_or_default()).any(|s| s == id));

    assert_eq!(seen["paused"], true);
    assert_eq!(seen["paused_listed"], json!([id]));

    // connect resumes it, with the same token.
    assert_eq!(seen["connect"], json!({"id": id, "token": token}));
    assert_eq!(seen["after_connect"]["state"], "running");

    assert_eq!(seen["killed"], json!([true, true]));
    assert_eq!(seen["kill_again"], false, "a killed sandbox is gone: {seen}");
    assert_eq!(seen["after_kill"], json!([id]), "killed sandboxes are not listed");
    assert_eq!(seen["main_killed"], true);
    assert_eq!(seen["connect_killed"], "SandboxNotFoundException", "{seen}");
    Ok(())
}
