//! Agents through the client API: validation, lists, drafts, and isolation between projects.

use agentplane_tests::{TestApp, assert_error, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

#[tokio::test]
async fn creating_an_agent_fills_the_spec_defaults_and_validates() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let (status, agent) = send(
        app.client(&tenant.key, Method::POST, "/agents")
            .json(&json!({"name": "Support", "model": "gpt-4o-mini", "tools": ["add"]})),
    )
    .await?;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    assert_eq!(agent["object"], "agent");
    assert_eq!(agent["config"]["execution"]["sync_timeout_ms"], 600_000);
    assert_eq!(agent["config"]["execution"]["background_max_duration_ms"], 1_800_000);
    assert_eq!(agent["config"]["attachments"]["max_files"], 10);
    assert_eq!(agent["config"]["attachments"]["max_file_bytes"], 20 * 1024 * 1024);
    assert_eq!(agent["config"]["humanInTheLoop"]["approval_timeout_minutes"], 1440);
    assert_eq!(agent["latest_version"], Value::Null);

    let cases = [
        (json!({"model": "m"}), "name"),
        (json!({"name": "a"}), "model"),
        (json!({"name": "a", "model": "m", "tools": ["rm_rf"]}), "tools[0]"),
        (json!({"name": "a", "model": "m", "tools": "add"}), "tools"),
        (json!({"name": "a", "model": "m", "max_steps": 51}), "max_steps"),
        (
            json!({"name": "a", "model": "m", "config": {"execution": {"sync_timeout_ms": 700_000}}}),
            "config.execution.sync_timeout_ms",
        ),
        (
            json!({"name": "a", "model": "m", "config": {"execution": {"sync_timeout_ms": "fast"}}}),
            "config.execution.sync_timeout_ms",
        ),
        (
            json!({"name": "a", "model": "m", "config": {"attachments": {"max_files": -1}}}),
            "config.attachments.max_files",
        ),
        (json!({"name": "a", "model": "m", "config": {"humanInTheLoop": 3}}), "config.humanInTheLoop"),
    ];
    for (body, param) in cases {
        let (status, answer) = send(app.client(&tenant.key, Method::POST, "/agents").json(&body)).await?;
        assert_error((status, &answer), StatusCode::BAD_REQUEST, "invalid_request_error");
        assert_eq!(answer["error"]["param"], param, "{body}");
    }
    let (_, list) = send(app.client(&tenant.key, Method::GET, "/agents")).await?;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1));
    Ok(())
}

#[tokio::test]
async fn another_projects_agents_are_invisible_and_untouchable() -> R {
    let app = TestApp::spawn().await?;
    let owner = app.tenant().await?;
    let intruder = app.tenant().await?;
    let agent = app.create_agent(&owner.key, json!({"name": "mine", "model": "m"})).await?;
    for (method, path, body) in [
        (Method::GET, format!("/agents/{agent}"), json!(null)),
        (Method::PATCH, format!("/agents/{agent}"), json!({"name": "stolen"})),
        (Method::POST, format!("/agents/{agent}/publish"), json!(null)),
        (Method::GET, format!("/agents/{agent}/versions"), json!(null)),
    ] {
        let (status, answer) = send(app.client(&intruder.key, method, &path).json(&body)).await?;
        assert_error((status, &answer), StatusCode::NOT_FOUND, "agent_not_found");
    }
    let (_, list) = send(app.client(&intruder.key, Method::GET, "/agents")).await?;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(0));
    let (_, mine) = send(app.client(&owner.key, Method::GET, &format!("/agents/{agent}"))).await?;
    assert_eq!(mine["name"], "mine");
    assert_eq!(mine["latest_version"], Value::Null);
    for id in ["nope", &uuid::Uuid::new_v4().to_string()] {
        let (status, answer) = send(app.client(&owner.key, Method::GET, &format!("/agents/{id}"))).await?;
        assert_error((status, &answer), StatusCode::NOT_FOUND, "agent_not_found");
    }
    Ok(())
}

#[tokio::test]
async fn patching_edits_the_draft_and_concurrent_publishes_number_uniquely() -> R {
    let app = TestApp::spawn().await?;
    let tenant = app.tenant().await?;
    let agent = app.create_agent(&tenant.key, json!({"name": "a", "model": "m1"})).await?;
    let path = format!("/agents/{agent}");
    let (status, body) =
        send(app.client(&tenant.key, Method::PATCH, &path).json(&json!({"model": "m2", "tools": ["echo"]})))
            .await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["model"], "m2");
    assert_eq!(body["name"], "a");
    for bad in [json!({}), json!({"model": 3}), json!({"tools": ["nope"]}), json!({"max_steps": 0})] {
        let (status, answer) = send(app.client(&tenant.key, Method::PATCH, &path).json(&bad)).await?;
        assert_error((status, &answer), StatusCode::BAD_REQUEST, "invalid_request_error");
    }
    let publishes =
        (0..4).map(|_| tokio::spawn(send(app.client(&tenant.key, Method::POST, &format!("{path}/publish")))));
    let mut numbers = Vec::new();
    for publish in publishes.collect::<Vec<_>>() {
        let (status, body) = publish.await??;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        numbers.push(body["version"].as_u64().unwrap_or(0));
    }
    numbers.sort();
    assert_eq!(numbers, [1, 2, 3, 4]);
    let (_, body) = send(app.client(&tenant.key, Method::GET, &path)).await?;
    assert_eq!(body["latest_version"], 4);
    assert_eq!(str_field(&body, "model")?, "m2");
    Ok(())
}
