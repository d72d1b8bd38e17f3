//! A Run's `sandboxAmountUsd` is its `sandboxRuntimeSeconds` × the deployment's price per
//! sandbox-second (`AGENTPLANE_SANDBOX_USD_PER_SECOND`, captured when the Run is created),
//! exactly, as a decimal string; `totalAmountUsd` is that plus `upstreamAmountUsd` and
//! `serviceFeeUsd` (both "0" for a BYOK Run, `serviceFeePercent` 0).

use std::time::{Duration, Instant};

use agentplane_domain::platform::sandbox_price::SandboxPrice;
use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, TestNode, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

/// 0.0001234 USD per second: seven fraction digits, so a float would show its rounding.
const PRICE: &str = "0.0001234";

async fn made(app: &TestApp, key: &str, path: &str, body: Value) -> anyhow::Result<String> {
    let (status, answer) = send(app.v1(key, Method::POST, path).json(&body)).await?;
    anyhow::ensure!(status.is_success(), "{path}: {status} {answer}");
    Ok(answer["data"]["id"].as_str().unwrap_or_default().to_owned())
}

/// `seconds` (the JSON number as the API wrote it) × `PRICE`, by hand: both as integers of
/// their smallest digit, multiplied, and the point put back.
fn expected_amount(seconds: &str) -> String {
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
    let seconds_units: u128 = format!("{whole}{fraction}").parse().unwrap_or(u128::MAX);
    let price_units: u128 = 1234; // 0.0001234 = 1234 × 10⁻⁷
    let digits = fraction.len() + 7;
    let product = (seconds_units * price_units).to_string();
    let padded = format!("{product:0>width$}", width = digits + 1);
    let (int, frac) = padded.split_at(padded.len() - digits);
    let frac = frac.trim_end_matches('0');
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    if frac.is_empty() { int.to_owned() } else { format!("{int}.{frac}") }
}

#[test]
fn the_hand_multiplication_is_right() {
    assert_eq!(expected_amount("1"), "0.0001234");
    assert_eq!(expected_amount("2.5"), "0.0003085");
    assert_eq!(expected_amount("0.001"), "0.0000001234");
    assert_eq!(expected_amount("1000"), "0.1234");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_completed_runs_sandbox_amount_is_its_seconds_times_the_configured_price() -> R {
    let model = ScriptedModel::start().await?;
    let price = SandboxPrice::parse(PRICE)?;
    let app = TestApp::spawn_with_model_and(&model, move |app| app.with_sandbox_price(price)).await?;
    let _node = TestNode::start(&app).await?;
    let tenant = app.tenant().await?;
    let env = made(&app, &tenant.key, "/environments", json!({})).await?;
    let session = made(&app, &tenant.key, &format!("/environments/{env}/sessions"), json!({})).await?;
    let runs = format!("/environments/{env}/sessions/{session}/runs");
    // A command that takes a while, so the sandbox time is well above a millisecond.
    model.push(Reply::tool("c1", "run_command", &json!({"command": "sleep 1; echo done > slept.txt"})));
    model.push(Reply::text("slept"));
    let run = made(&app, &tenant.key, &runs, json!({"model": "gpt-test", "input": "sleep a second"})).await?;

    let started = Instant::now();
    let done = loop {
        let (status, body) = send(app.v1(&tenant.key, Method::GET, &format!("{runs}/{run}"))).await?;
        anyhow::ensure!(status == StatusCode::OK, "{body}");
        if matches!(body["data"]["status"].as_str(), Some("completed" | "failed" | "stopped")) {
            break body;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(90), "the Run never ended: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let usage = &done["data"]["usage"];
    assert_eq!(done["data"]["status"], "completed", "{done}");
    let seconds = usage["sandboxRuntimeSeconds"].to_string();
    assert!(usage["sandboxRuntimeSeconds"].as_f64().is_some_and(|s| s >= 1.0), "{usage}");
    let amount = expected_amount(&seconds);
    assert_ne!(amount, "0");
    assert_eq!(usage["sandboxAmountUsd"], json!(amount), "{seconds} s × {PRICE}: {usage}");
    // BYOK: no model charges, no fee; the total is the sandbox charge plus those zeros.
    assert_eq!(usage["upstreamAmountUsd"], "0", "{usage}");
    assert_eq!(usage["serviceFeeUsd"], "0", "{usage}");
    assert_eq!(usage["serviceFeePercent"], 0, "{usage}");
    assert_eq!(usage["calls"], json!([]), "{usage}");
    assert_eq!(usage["totalAmountUsd"], json!(amount), "{usage}");

    // The list shows the same usage.
    let (status, list) = send(app.v1(&tenant.key, Method::GET, &runs)).await?;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["data"][0]["usage"], *usage, "{list}");
    Ok(())
}

/// The stack passes its `SandboxUsdPerSecond` parameter (default 0) to every function as
/// `AGENTPLANE_SANDBOX_USD_PER_SECOND`, and CloudFormation refuses exactly the values the
/// functions would refuse to start with (the same digit bounds).
#[test]
fn the_template_sets_the_price_from_a_parameter_of_default_zero() -> R {
    use agentplane_domain::platform::sandbox_price::{PRICE_FRACTION_DIGITS, PRICE_WHOLE_DIGITS};
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../infra/template.yaml");
    let template: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(path)?)?;
    let parameter = &template["Parameters"]["SandboxUsdPerSecond"];
    let default = parameter["Default"].as_str().unwrap_or("missing");
    assert_eq!(SandboxPrice::parse(default)?, SandboxPrice::ZERO, "{parameter:?}");
    assert_eq!(
        parameter["AllowedPattern"].as_str(),
        Some(format!("^[0-9]{{1,{PRICE_WHOLE_DIGITS}}}(\\.[0-9]{{1,{PRICE_FRACTION_DIGITS}}})?$").as_str())
    );
    let variable =
        &template["Globals"]["Function"]["Environment"]["Variables"]["AGENTPLANE_SANDBOX_USD_PER_SECOND"];
    let serde_yaml::Value::Tagged(tagged) = variable else { anyhow::bail!("not a !Ref: {variable:?}") };
    assert_eq!((tagged.tag.to_string(), tagged.value.as_str()), ("!Ref".into(), Some("SandboxUsdPerSecond")));
    Ok(())
}
