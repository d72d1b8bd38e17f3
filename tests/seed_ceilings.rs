//! Seed 002: `AGENT_SYNC_TIMEOUT_MS` and `AGENT_BACKGROUND_MAX_DURATION_MS` raise the ceilings as
//! well as lower them, and a turn is never killed by Lambda before its ceiling: every function
//! that runs turns is told its own timeout (`AGENTPLANE_FUNCTION_TIMEOUT_S`, the template's
//! `Timeout`), under which the sync ceiling and one background invocation's budget are fitted
//! (the arithmetic's unit tests are in shared/domain/src/ceilings.rs). An agent's Execution
//! settings default to the deployment's ceilings and may only lower them.

#![allow(clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use agentplane_api::Route;
use agentplane_api::jobs::Job;
use agentplane_domain::ceilings::{self, FUNCTION_MARGIN_MS};
use agentplane_tests::{TestApp, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::json;
use serde_yaml::Value;

type R = anyhow::Result<()>;

fn template() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../infra/template.yaml");
    serde_yaml::from_str(&std::fs::read_to_string(path).expect("infra/template.yaml"))
        .expect("template parses")
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[test]
fn every_function_that_runs_turns_knows_its_timeout_and_its_turns_fit_in_it() {
    let t = template();
    let resources = t["Resources"].as_mapping().expect("Resources");
    let mut checked = Vec::new();
    for (id, resource) in resources {
        let props = &resource["Properties"];
        // A function is its own binary, named for the route or job it serves.
        let Some(name) = text(&resource["Metadata"]["BuildProperties"]["Binary"]) else { continue };
        let turns = Route::by_function_name(&name).is_some_and(Route::runs_turns);
        let runs = matches!(Job::by_function_name(&name), Some(Job::RunExecution));
        let told = text(&props["Environment"]["Variables"]["AGENTPLANE_FUNCTION_TIMEOUT_S"]);
        if !(turns || runs) {
            assert_eq!(told, None, "{id:?}: only functions that run turns are told their timeout");
            continue;
        }
        let timeout_s = props["Timeout"].as_u64().expect("Timeout");
        assert_eq!(told, Some(timeout_s.to_string()), "{id:?}: AGENTPLANE_FUNCTION_TIMEOUT_S is its Timeout");
        // With the deployment's settings as shipped (unset), what runs in it ends in time.
        let sync = ceilings::sync_ceiling(None, Some(timeout_s));
        assert_eq!(sync.warning, None, "{id:?}: the spec's 600 s fits as shipped");
        assert!(sync.ms + FUNCTION_MARGIN_MS <= timeout_s * 1000, "{id:?}");
        if runs {
            let default = agentplane_engine::background::BackgroundConfig::default().invocation_budget;
            let default_ms = u64::try_from(default.as_millis()).expect("ms");
            let budget = ceilings::invocation_budget(None, default_ms, Some(timeout_s));
            assert_eq!(budget.warning, None, "{id:?}");
            assert!(budget.ms + FUNCTION_MARGIN_MS <= timeout_s * 1000, "{id:?}");
        }
        checked.push(name);
    }
    let turn_routes = Route::ALL.iter().filter(|r| r.runs_turns()).count();
    assert_eq!(checked.len(), turn_routes + 1, "every turn route and run-execution: {checked:?}");
}

#[tokio::test]
async fn agents_default_to_the_deployments_ceilings_and_may_only_lower_them() -> R {
    // A deployment that raised both ceilings.
    let raised = TestApp::spawn_with(|mut app| {
        app.sync_ceiling = Duration::from_millis(840_000);
        app.background.max_duration_ms = 7_200_000;
        app
    })
    .await?;
    let tenant = raised.tenant().await?;
    let create = |execution: serde_json::Value| {
        raised
            .client(&tenant.key, Method::POST, "/agents")
            .json(&json!({"name": "long", "model": "gpt-4o-mini", "config": {"execution": execution}}))
    };
    let (status, agent) = send(create(json!({}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    let execution = &agent["config"]["execution"];
    assert_eq!(
        (execution["sync_timeout_ms"].clone(), execution["background_max_duration_ms"].clone()),
        (json!(840_000), json!(7_200_000))
    );
    let (status, body) =
        send(create(json!({"sync_timeout_ms": 700_000, "background_max_duration_ms": 3_600_000}))).await?;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = send(create(json!({"sync_timeout_ms": 840_001}))).await?;
    assert_eq!(
        (status, body["error"]["param"].clone()),
        (StatusCode::BAD_REQUEST, json!("config.execution.sync_timeout_ms"))
    );
    let id = str_field(&agent, "id")?;
    let (status, body) = send(
        raised
            .client(&tenant.key, Method::PATCH, &format!("/agents/{id}"))
            .json(&json!({"config": {"execution": {"background_max_duration_ms": 7_200_001}}})),
    )
    .await?;
    assert_eq!(
        (status, body["error"]["param"].clone()),
        (StatusCode::BAD_REQUEST, json!("config.execution.background_max_duration_ms"))
    );

    // The spec's ceilings where the deployment says nothing.
    let plain = TestApp::spawn().await?;
    let tenant = plain.tenant().await?;
    let (status, agent) = send(plain.client(&tenant.key, Method::POST, "/agents").json(
        &json!({"name": "n", "model": "gpt-4o-mini", "config": {"execution": {"sync_timeout_ms": 700_000}}}),
    ))
    .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{agent}");
    Ok(())
}
