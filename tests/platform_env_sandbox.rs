//! An environment's workspace sandbox is the platform's: the sandbox API (`/sandbox/v1`) may
//! not kill, pause, resume or extend it (409 in E2B's error format), and the workspace's files
//! stay readable after the attempts.

use agentplane_tests::{TestApp, TestNode, send};
use reqwest::{Method, StatusCode};
use serde_json::json;

type R = anyhow::Result<()>;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sandbox_api_cannot_end_or_freeze_an_environments_workspace() -> R {
    let app = TestApp::spawn().await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let (status, created) = send(app.v1(&tenant.key, Method::POST, "/environments").json(&json!({}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let env = created["data"]["id"].as_str().unwrap_or_default().to_owned();
    let file = format!("/environments/{env}/files?path=/workspace/kept.txt");
    let (status, body) = send(app.v1(&tenant.key, Method::PUT, &file).body("kept")).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    let stored = app.store.environments().get(&tenant.project_id.parse()?, &env.parse()?).await?;
    let sandbox = stored.sandbox_id.map(|s| s.to_string()).unwrap_or_default();
    assert!(!sandbox.is_empty(), "the environment has no sandbox");

    let attempts = [
        (Method::DELETE, format!("/sandboxes/{sandbox}"), None),
        (Method::POST, format!("/sandboxes/{sandbox}/pause"), None),
        (Method::POST, format!("/sandboxes/{sandbox}/timeout"), Some(json!({"timeout": 60}))),
    ];
    for (method, path, body) in attempts {
        let mut request = app.sandbox(&tenant.key, method.clone(), &path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let (status, answer) = send(request).await?;
        assert_eq!(status, StatusCode::CONFLICT, "{method} {path}: {answer}");
        assert_eq!(answer["code"], 409, "{answer}");
        assert!(
            answer["message"].as_str().is_some_and(|m| m.contains(&env)),
            "the message names the environment: {answer}"
        );
    }
    // Still running, its workspace intact.
    let (status, read) =
        send(app.sandbox(&tenant.key, Method::GET, &format!("/sandboxes/{sandbox}"))).await?;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["state"], "running", "{read}");
    let response = app.v1(&tenant.key, Method::GET, &file).send().await?;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.bytes().await?.as_ref(), b"kept");

    // A sandbox the project made itself is still its own to kill.
    let (status, own) =
        send(app.sandbox(&tenant.key, Method::POST, "/sandboxes").json(&json!({"timeout": 60}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{own}");
    let own = own["sandboxID"].as_str().unwrap_or_default().to_owned();
    let (status, _) = send(app.sandbox(&tenant.key, Method::DELETE, &format!("/sandboxes/{own}"))).await?;
    assert_eq!(status, StatusCode::NO_CONTENT);
    Ok(())
}
