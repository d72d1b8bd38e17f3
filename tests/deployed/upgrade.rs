//! The upgrade check: a stack deployed from the previous release's template
//! (`infra/releases/<previous>/template.yaml`) holds data written through its surfaces; the
//! stack is then updated to this template; the update's change set must replace and remove no
//! table, queue, bucket or secret (every one keeps its physical id), and everything written
//! before reads back after, and still works.
//!
//! tests/run.sh runs the two phases around the update: `AGENTPLANE_UPGRADE_PHASE=before` (write,
//! then save what was written to `AGENTPLANE_UPGRADE_STATE`) and `=after` (check the change set
//! against `AGENTPLANE_UPGRADE_BEFORE`, the first deploy's `deployed.json`, and read back).
//! Without the phase set, both tests say so and pass.

use std::time::Duration;

use agentplane_api::jobs::Job;
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::send;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{R, Stack, Tenant, core_creates_a_project_and_a_key, created, receiver, turn, verify, wait_for};

/// The resource types whose replacement or removal would lose data.
const STATEFUL: &[&str] =
    &["AWS::DynamoDB::Table", "AWS::SQS::Queue", "AWS::S3::Bucket", "AWS::SecretsManager::Secret"];

fn phase(want: &str) -> bool {
    let got = std::env::var("AGENTPLANE_UPGRADE_PHASE").unwrap_or_default();
    if got != want {
        eprintln!("AGENTPLANE_UPGRADE_PHASE is not {want}: the upgrade step is skipped");
    }
    got == want
}

fn state_path() -> String {
    std::env::var("AGENTPLANE_UPGRADE_STATE").unwrap_or_else(|_| "/tmp/agentplane-upgrade-state.json".into())
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

async fn event_count(s: &Stack, t: &Tenant, session: &str) -> anyhow::Result<usize> {
    let (status, page) =
        send(s.client(&t.key, Method::GET, &format!("/sessions/{session}/events?limit=100"))).await?;
    anyhow::ensure!(status == StatusCode::OK, "events: {status} {page}");
    Ok(page["data"].as_array().map_or(0, Vec::len))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn before_the_update_the_previous_release_holds_data_from_every_surface() -> R {
    if !phase("before") {
        return Ok(());
    }
    let Some(s) = Stack::load().await? else { return Ok(()) };
    let model = ScriptedModel::start_on(&s.model_addr).await?;
    let t = core_creates_a_project_and_a_key(&s).await?;

    // An agent with a tool that needs approval, published (version 1).
    let agent = created(
        s.client(&t.key, Method::POST, "/agents").json(&json!({
            "name": "upgraded", "model": "gpt-4o-mini", "instructions": "Be brief.", "tools": ["add"],
            "config": {"humanInTheLoop": {"tool_approvals": ["add"]}}
        })),
        "agent",
    )
    .await?;
    let agent = text(&agent["id"]);
    let (status, published) =
        send(s.client(&t.key, Method::POST, &format!("/agents/{agent}/publish"))).await?;
    anyhow::ensure!(status.is_success(), "publish: {status} {published}");

    // A session with a completed turn (its events), and one paused on an approval.
    model.push(Reply::text("Before the upgrade"));
    model.push(Reply::text("Upgrade title"));
    let answer = turn(&s, &t, json!({"agent": agent, "input": "hello"})).await?;
    anyhow::ensure!(answer["status"] == "completed", "{answer}");
    let talked = text(&answer["session_id"]);
    model.push(Reply::tool("a1", "add", &json!({"a": 2, "b": 3})));
    model.push(Reply::text("Paused title"));
    let paused = turn(&s, &t, json!({"agent": agent, "input": "What is 2+3?"})).await?;
    anyhow::ensure!(paused["status"] == "requires_action", "{paused}");
    let waiting = text(&paused["session_id"]);
    let action = text(&paused["required_action"]["actions"][0]["id"]);
    anyhow::ensure!(action.starts_with("act_"), "{paused}");

    // A webhook endpoint (its signing secret sealed at rest), for one event type nothing here
    // sends, so no delivery is left in flight across the update.
    let (url, _) = receiver().await?;
    let endpoint = created(
        s.client(&t.key, Method::POST, "/webhooks")
            .json(&json!({"url": url, "eventTypes": ["agent_run.succeeded"]})),
        "endpoint",
    )
    .await?;

    // A Platform environment with a session and a Run (stopped: no node runs in this phase).
    let (env, platform_session, run) = super::platform_run_created_and_stopped(&s, &t).await?;

    let state = json!({
        "key": t.key, "agent": agent, "talked": talked, "talked_events": event_count(&s, &t, &talked).await?,
        "waiting": waiting, "action": action,
        "endpoint": endpoint["id"], "endpoint_secret": endpoint["secret"],
        "env": env, "platform_session": platform_session, "run": run,
    });
    std::fs::write(state_path(), serde_json::to_string_pretty(&state)?)?;
    eprintln!("upgrade: wrote {}", state_path());
    Ok(())
}

/// Stateful resources by logical id: (type, physical id).
fn stateful(info: &Value, types: &std::collections::BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = info["physical"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(id, _)| types.get(*id).is_some_and(|t| STATEFUL.contains(&t.as_str())))
        .map(|(id, physical)| (id.clone(), text(physical)))
        .collect();
    out.sort();
    out
}

/// Every resource's type, from a template (`Type:` under each top-level resource).
fn resource_types(template: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut inside = false;
    let mut current = None;
    for line in template.lines() {
        if !line.starts_with(' ') && !line.is_empty() && !line.starts_with('#') {
            inside = line.trim_end() == "Resources:";
            continue;
        }
        if !inside {
            continue;
        }
        if let Some(name) =
            line.strip_prefix("  ").filter(|l| !l.starts_with(' ')).and_then(|l| l.strip_suffix(':'))
        {
            current = Some(name.to_owned());
        } else if let (Some(name), Some(kind)) = (&current, line.trim().strip_prefix("Type: ")) {
            out.entry(name.clone()).or_insert_with(|| kind.trim().to_owned());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_the_update_nothing_stateful_was_replaced_and_everything_reads_back() -> R {
    if !phase("after") {
        return Ok(());
    }
    let Some(s) = Stack::load().await? else { return Ok(()) };
    let before_path = std::env::var("AGENTPLANE_UPGRADE_BEFORE")?;
    let before: Value = serde_json::from_str(&std::fs::read_to_string(&before_path)?)?;
    let after: Value =
        serde_json::from_str(&std::fs::read_to_string(std::env::var("AGENTPLANE_DEPLOYED")?)?)?;
    let template = std::fs::read_to_string(format!("{}/../infra/template.yaml", env!("CARGO_MANIFEST_DIR")))?;
    let types = resource_types(&template);
    assert!(types.values().any(|t| t == "AWS::DynamoDB::Table"), "the template's resources were read");

    // The update's change set: no stateful resource replaced or removed.
    let changes = after["changes"].as_array().cloned().unwrap_or_default();
    for change in &changes {
        if STATEFUL.contains(&change["type"].as_str().unwrap_or_default()) {
            assert_ne!(change["action"], "Remove", "the update removes {change}");
            assert!(
                !matches!(change["replacement"].as_str(), Some("True" | "Conditional")),
                "the update replaces {change}"
            );
        }
    }
    // And each kept its physical id (its data).
    let (was, is) = (stateful(&before, &types), stateful(&after, &types));
    assert!(!was.is_empty(), "the first deploy's resources: {before_path}");
    for (id, physical) in &was {
        let now = is.iter().find(|(i, _)| i == id).map(|(_, p)| p.as_str());
        assert_eq!(now, Some(physical.as_str()), "{id} changed its physical id across the update");
    }
    eprintln!("upgrade: {} changes, {} stateful resources kept", changes.len(), was.len());

    let state: Value = serde_json::from_str(&std::fs::read_to_string(state_path())?)?;
    let t = Tenant { key: text(&state["key"]) };
    let model = ScriptedModel::start_on(&s.model_addr).await?;

    // The key, the agent and its published version.
    let agent = text(&state["agent"]);
    let (status, versions) =
        send(s.client(&t.key, Method::GET, &format!("/agents/{agent}/versions"))).await?;
    assert_eq!(status, StatusCode::OK, "{versions}");
    assert!(versions.to_string().contains("\"version\":1"), "version 1 survives: {versions}");
    // The session's events, all of them.
    let talked = text(&state["talked"]);
    assert_eq!(event_count(&s, &t, &talked).await?, state["talked_events"].as_u64().unwrap_or(0) as usize);
    // The paused action still waits, and answering it carries the turn on.
    let waiting = text(&state["waiting"]);
    let action = text(&state["action"]);
    let (status, pending) =
        send(s.client(&t.key, Method::GET, &format!("/sessions/{waiting}/actions"))).await?;
    assert_eq!(status, StatusCode::OK, "{pending}");
    assert!(pending.to_string().contains(&action), "the paused action survives: {pending}");
    model.push(Reply::text("After the upgrade: 5"));
    model.push(Reply::text("After title"));
    let (status, answered) = send(
        s.client(&t.key, Method::POST, &format!("/sessions/{waiting}/actions/{action}"))
            .json(&json!({"decision": "approve"})),
    )
    .await?;
    assert!(status.is_success(), "approve: {status} {answered}");
    wait_for("the approved turn ends", Duration::from_secs(60), async || {
        let (_, page) = send(s.client(&t.key, Method::GET, &format!("/sessions/{waiting}/events?limit=100")))
            .await
            .ok()?;
        page.to_string().contains("After the upgrade: 5").then_some(())
    })
    .await?;
    // The webhook endpoint, its sealed secret still signing: a test delivery verifies with the
    // secret the previous release handed out.
    let (_, got) = receiver().await?;
    let endpoint = text(&state["endpoint"]);
    let (status, attempt) =
        send(s.client(&t.key, Method::POST, &format!("/webhooks/{endpoint}/test"))).await?;
    assert_eq!(status, StatusCode::OK, "{attempt}");
    assert_eq!(attempt["statusCode"], 200, "{attempt}");
    let delivered = wait_for("the test delivery", Duration::from_secs(30), async || {
        got.0.lock().expect("lock").first().cloned()
    })
    .await?;
    assert_eq!(verify(&text(&state["endpoint_secret"]), &delivered.0, &delivered.1), "ok");
    let (status, body) = send(s.client(&t.key, Method::DELETE, &format!("/webhooks/{endpoint}"))).await?;
    assert!(status.is_success(), "{status} {body}");
    // The Platform Run, as it ended.
    let run = format!(
        "/environments/{}/sessions/{}/runs/{}",
        text(&state["env"]),
        text(&state["platform_session"]),
        text(&state["run"])
    );
    let (status, got) = send(s.v1(&t.key, Method::GET, &run)).await?;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["data"]["status"], "stopped", "{got}");
    // The count backfill brings the previous release's environment into its project's count.
    // Its schedule may have run it already (LocalStack fires a new schedule at once), so the
    // effect is read from the table: the environment is shape 2 and counted, its project's
    // count holds it, and an invocation now finds the backfill through.
    let scheduled = json!({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}});
    let backfill = s.invoke(Job::CountBackfill.function_name(), &scheduled).await?;
    assert_eq!(backfill["done"], true, "count-backfill: {backfill}");
    let main = is.iter().find(|(id, _)| id == "MainTable").map(|(_, p)| p.clone()).unwrap_or_default();
    let scan = dynamo(
        &s,
        "Scan",
        json!({"TableName": main, "FilterExpression": "SK = :env",
               "ExpressionAttributeValues": {":env": {"S": format!("ENV#{}", text(&state["env"]))}}}),
    )
    .await?;
    let env_item = &scan["Items"][0];
    assert_eq!(env_item["shape"], json!({"N": "2"}), "the 0.1.0 environment after the backfill: {scan}");
    assert_eq!(env_item["counted"], json!({"BOOL": true}), "{scan}");
    let count = dynamo(
        &s,
        "GetItem",
        json!({"TableName": main, "ConsistentRead": true,
               "Key": {"PK": env_item["PK"].clone(), "SK": {"S": "ENVS#COUNT"}}}),
    )
    .await?;
    assert_eq!(count["Item"]["environment_count"], json!({"N": "1"}), "{count}");
    let again = s.invoke(Job::CountBackfill.function_name(), &scheduled).await?;
    assert_eq!((again["done"].clone(), again["pages"].clone()), (json!(true), json!(0)), "{again}");
    Ok(())
}

/// One DynamoDB call on the emulator behind the stack (JSON protocol).
async fn dynamo(s: &Stack, target: &str, body: Value) -> anyhow::Result<Value> {
    let answer: Value = s
        .http
        .post(format!("{}/", s.endpoint))
        .header("X-Amz-Target", format!("DynamoDB_20120810.{target}"))
        .header("Content-Type", "application/x-amz-json-1.0")
        .header("Authorization", super::aws_auth("dynamodb"))
        .body(body.to_string())
        .send()
        .await?
        .json()
        .await?;
    Ok(answer)
}

#[test]
fn resource_types_reads_the_templates_resources() {
    let template = "Parameters:\n  X:\n    Type: String\nResources:\n  MainTable:\n    Type: AWS::DynamoDB::Table\n    Properties:\n      Type: nested\n  Q:\n    Type: AWS::SQS::Queue\nOutputs:\n  O:\n    Value: 1\n";
    let types = resource_types(template);
    assert_eq!(types.get("MainTable").map(String::as_str), Some("AWS::DynamoDB::Table"));
    assert_eq!(types.get("Q").map(String::as_str), Some("AWS::SQS::Queue"));
    assert!(!types.contains_key("X") && !types.contains_key("O"));
}
