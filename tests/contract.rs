//! The contract as the documents state it: schemathesis (PyPI) drives every surface's OpenAPI
//! document, served by the running router at `/openapi/{surface}.json`, with valid keys, and
//! fails on any 5xx, any answer whose status or body the document does not describe, and any
//! request that does not answer within its timeout. The README test command installs
//! schemathesis (`AGENTPLANE_SCHEMATHESIS`); see `tests/run.sh`.
//!
//! Left out: the SSE stream (`client-session-events-stream`), which by design stays open for
//! as long as its session lives; tests/events.rs and tests/edge.rs cover it.

use std::path::PathBuf;
use std::time::Duration;

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, TestNode, send, str_field};
use reqwest::Method;
use serde_json::json;

type R = anyhow::Result<()>;

fn schemathesis() -> PathBuf {
    if let Ok(path) = std::env::var("AGENTPLANE_SCHEMATHESIS") {
        return PathBuf::from(path);
    }
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.localstack/tools/bin/schemathesis");
    assert!(local.exists(), "schemathesis is not installed: run the README test command (bash tests/run.sh)");
    local
}

/// Runs schemathesis against `surface`'s document on `app`, with `headers`, and path
/// parameters fixed to ids that exist (`("project_id", id)`) so that calls reach past the
/// lookup (a `query.` name fixes a query parameter, its value as TOML); fails the test with its
/// report unless every check passed.
async fn drive(app: &TestApp, surface: &str, headers: &[String], ids: &[(&str, String)]) -> R {
    let config = std::env::temp_dir().join(format!("schemathesis-{}.toml", uuid::Uuid::new_v4().simple()));
    let mut toml = String::from("[parameters]\n");
    for (name, value) in ids {
        let value = if name.starts_with("query.") { value.clone() } else { format!("\"{value}\"") };
        let name = if name.contains('.') { name.to_string() } else { format!("path.{name}") };
        toml.push_str(&format!("\"{name}\" = {value}\n"));
    }
    std::fs::write(&config, toml)?;
    let mut command = tokio::process::Command::new(schemathesis());
    command
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(format!("{}/openapi/{surface}.json", app.base))
        .args(["--url", &app.base])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
        ])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--max-examples", "25", "--seed", "7", "--workers", "1"])
        .args(["--request-timeout", "30", "--wait-for-schema", "10"])
        .args(["--suppress-health-check", "all"])
        .arg("--no-color")
        .env("NO_COLOR", "1")
        .kill_on_drop(true);
    if surface == "client" {
        command.args(["--exclude-operation-id", "client-session-events-stream"]);
    }
    for header in headers {
        command.args(["-H", header]);
    }
    let run = tokio::time::timeout(Duration::from_secs(900), command.output()).await;
    let _ = std::fs::remove_file(&config);
    let run = run??;
    let report = format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    eprintln!("{report}");
    anyhow::ensure!(run.status.success(), "schemathesis on the {surface} document failed:\n{report}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_core_surface_keeps_its_document() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let (spare_key, _) = app.create_key(&tenant.project_id).await?;
    let session = session(&app, &tenant.key).await?;
    let (_, node) =
        send(app.core(Method::POST, "/core/v1/sandbox/nodes").json(&json!({"name": "contract"}))).await?;
    let (_, group) =
        send(app.core(Method::POST, "/core/v1/tenants").json(&json!({"name": "contract"}))).await?;
    let ids = [
        ("project_id", tenant.project_id.clone()),
        ("key_id", spare_key),
        ("session_id", session),
        ("node_id", str_field(&node, "id")?),
        ("tenant_id", str_field(&group, "id")?),
    ];
    drive(&app, "core", &[format!("Authorization: Bearer {}", app.core_key)], &ids).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_client_surface_keeps_its_document() -> R {
    let model = ScriptedModel::start().await?;
    for _ in 0..2000 {
        model.push(Reply::text("ok"));
    }
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "contract", "model": "gpt-test", "instructions": "be brief"}),
        )
        .await?;
    // The session's agent takes files, so that the file routes answer past their checks.
    let files_agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "files", "model": "gpt-test", "config": {"attachments": {"enabled": true}}}),
        )
        .await?;
    let (status, created) =
        send(app.client(&tenant.key, Method::POST, "/sessions").json(&json!({"agent_id": files_agent})))
            .await?;
    anyhow::ensure!(status.is_success(), "create session: {status} {created}");
    let session = str_field(&created, "id")?;
    let action = pending_action(&app, &tenant.project_id, &session).await?;
    let file = pending_file(&app, &tenant.project_id, &session).await?;
    let message = assistant_message(&app, &tenant.key, &session).await?;
    let background = app
        .create_agent(
            &tenant.key,
            json!({"name": "background", "model": "gpt-test", "config": {"execution": {"background_enabled": true}}}),
        )
        .await?;
    let (_, run) = send(
        app.client(&tenant.key, Method::POST, "/responses")
            .json(&json!({"agent": background, "input": "hi", "background": true})),
    )
    .await?;
    let ids = [
        ("agent_id", agent),
        ("session_id", session),
        ("action_id", action),
        ("run_id", str_field(&run, "id")?),
        ("file_id", file),
        ("event_id", message),
    ];
    drive(&app, "client", &[format!("Authorization: Bearer {}", tenant.key)], &ids).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_node_surface_keeps_its_document() -> R {
    let app = TestApp::spawn().await?;
    let (_, node) =
        send(app.core(Method::POST, "/core/v1/sandbox/nodes").json(&json!({"name": "contract"}))).await?;
    let token = str_field(&node, "token")?;
    // A poll waits up to 20 s for a command by design; 1 s keeps the run short.
    drive(&app, "node", &[format!("Authorization: Bearer {token}")], &[("query.wait", "1".to_owned())]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sandbox_surface_keeps_its_document() -> R {
    let app = TestApp::spawn().await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let (status, sandbox) =
        send(app.sandbox(&tenant.key, Method::POST, "/sandboxes").json(&json!({}))).await?;
    anyhow::ensure!(status.is_success(), "create sandbox: {status} {sandbox}");
    let sandbox_id = str_field(&sandbox, "sandboxID")?;
    let path = format!("/sandboxes/{sandbox_id}/processes");
    let (status, process) =
        send(app.sandbox(&tenant.key, Method::POST, &path).json(&json!({"cmd": "echo", "args": ["hi"]})))
            .await?;
    anyhow::ensure!(status.is_success(), "start a process: {status} {process}");
    let mut ids = vec![("sandbox_id", sandbox_id)];
    if let Ok(process_id) = str_field(&process, "processId") {
        ids.push(("process_id", process_id));
    }
    drive(&app, "sandbox", &[format!("X-API-Key: {}", tenant.key)], &ids).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_platform_surface_keeps_its_document() -> R {
    let app = TestApp::spawn().await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let auth = || app.request(Method::POST, "/v1/environments").bearer_auth(&tenant.key);
    let (status, environment) = send(auth().json(&json!({"name": "contract"}))).await?;
    anyhow::ensure!(status.is_success(), "create environment: {status} {environment}");
    let environment_id =
        environment.pointer("/data/id").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
    let path = format!("/v1/environments/{environment_id}/sessions");
    let (status, session) =
        send(app.request(Method::POST, &path).bearer_auth(&tenant.key).json(&json!({}))).await?;
    anyhow::ensure!(status.is_success(), "create session: {status} {session}");
    let session_id = session.pointer("/data/id").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
    let file = format!("/v1/environments/{environment_id}/files?path=/workspace/README.md");
    let (status, written) =
        send(app.request(Method::PUT, &file).bearer_auth(&tenant.key).body("# hi")).await?;
    anyhow::ensure!(status.is_success(), "write a file: {status} {written}");
    let runs = format!("/v1/environments/{environment_id}/sessions/{session_id}/runs");
    let (status, run) = send(
        app.request(Method::POST, &runs).bearer_auth(&tenant.key).json(&json!({"model": "m", "input": "x"})),
    )
    .await?;
    anyhow::ensure!(status.is_success(), "create a run: {status} {run}");
    let run_id = run.pointer("/data/id").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
    let ids = [("environmentId", environment_id), ("sessionId", session_id), ("runId", run_id)];
    drive(&app, "platform", &[format!("Authorization: Bearer {}", tenant.key)], &ids).await
}

/// A session of the key's project.
async fn session(app: &TestApp, key: &str) -> anyhow::Result<String> {
    let (status, body) = send(app.client(key, Method::POST, "/sessions").json(&json!({}))).await?;
    anyhow::ensure!(status.is_success(), "create session: {status} {body}");
    str_field(&body, "id")
}

/// The event id of an assistant message of `session` (a turn run before the contract run).
async fn assistant_message(app: &TestApp, key: &str, session: &str) -> anyhow::Result<String> {
    let path = format!("/api/client/v1/sessions/{session}/messages");
    let (status, body) =
        send(app.request(Method::POST, &path).bearer_auth(key).json(&json!({"input": "hi"}))).await?;
    anyhow::ensure!(status.is_success(), "a turn: {status} {body}");
    let path = format!("/api/client/v1/sessions/{session}/events?limit=100");
    let (_, events) = send(app.request(Method::GET, &path).bearer_auth(key)).await?;
    events["data"]
        .as_array()
        .and_then(|d| d.iter().find(|e| e["type"] == "message.assistant"))
        .and_then(|e| e["id"].as_u64())
        .map(|id| id.to_string())
        .ok_or_else(|| anyhow::anyhow!("no assistant message in {events}"))
}

/// A pending file of `session`, written as its create route writes it, so that the file routes
/// answer past their lookup from the first request.
async fn pending_file(app: &TestApp, project: &str, session: &str) -> anyhow::Result<String> {
    use agentplane_domain::file::{FileId, NewFile};
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let mut random = [0u8; 12];
    random.copy_from_slice(&bytes[..12]);
    let new = NewFile { filename: "contract.txt".into(), content_type: "text/plain".into(), size: 3 };
    let file = new.into_file(
        FileId::from_random(random),
        project.parse().map_err(|e| anyhow::anyhow!("{e:?}"))?,
        session.parse().map_err(|e| anyhow::anyhow!("{e:?}"))?,
        agentplane_domain::Timestamp::from_unix_millis(1_700_000_000_000),
    );
    app.store.files().create(&file, 10).await?;
    Ok(file.id.to_string())
}

/// A pending question of `session`, written as a pausing turn writes it, so that the actions
/// routes answer past their lookup (once 200, then 409).
async fn pending_action(app: &TestApp, project: &str, session: &str) -> anyhow::Result<String> {
    use agentplane_domain::action::{Action, ActionId, ActionStatus, ActionType};
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let mut random = [0u8; 12];
    random.copy_from_slice(&bytes[..12]);
    let action = Action {
        id: ActionId::from_random(random),
        project_id: project.parse().map_err(|e| anyhow::anyhow!("{e:?}"))?,
        session_id: session.parse().map_err(|e| anyhow::anyhow!("{e:?}"))?,
        turn_id: "turn_contract".into(),
        pause_version: 1,
        call_id: "call_contract".into(),
        kind: ActionType::Question,
        status: ActionStatus::Pending,
        tool: "ask_user".into(),
        args: json!({"question": "Which?"}),
        question: Some("Which?".into()),
        answer: None,
        created_at: agentplane_domain::Timestamp::from_unix_millis(1_700_000_000_000),
        expires_at: None,
        settled_at: None,
        answer_key_ids: None,
    };
    let put = agentplane_store::dynamo::actions::put_new(&app.store, &action)?;
    app.store
        .dynamo
        .transact_write_items()
        .transact_items(aws_sdk_dynamodb::types::TransactWriteItem::builder().put(put).build())
        .send()
        .await?;
    Ok(action.id.to_string())
}
