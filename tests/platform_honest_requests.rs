//! What `/v1` refuses rather than pretends: `steeringEnabled: true` (steering is not built, so a
//! Run that recorded it would promise what nothing honours) and query parameters a route does not
//! take (the spec's 400 "Invalid request" of its GET Run; every GET and the stop route alike), each
//! a 400 `invalid_request` naming the parameter, with nothing created or changed.

use agentplane_tests::{TestApp, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

async fn made(app: &TestApp, key: &str, path: &str, body: Value) -> anyhow::Result<String> {
    let (status, answer) = send(app.v1(key, Method::POST, path).json(&body)).await?;
    anyhow::ensure!(status.is_success(), "{path}: {status} {answer}");
    Ok(answer["data"]["id"].as_str().unwrap_or_default().to_owned())
}

fn refused(status: StatusCode, body: &Value, param: &str) -> anyhow::Result<()> {
    anyhow::ensure!(status == StatusCode::BAD_REQUEST, "{status} {body}");
    anyhow::ensure!(body.pointer("/error/code") == Some(&json!("invalid_request")), "{body}");
    anyhow::ensure!(body.pointer("/error/details/param") == Some(&json!(param)), "{body}");
    anyhow::ensure!(body.pointer("/error/requestId").and_then(Value::as_str).is_some(), "{body}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn steering_enabled_true_is_refused_until_steering_exists() -> R {
    let app = TestApp::spawn_without_runs_consumer().await?;
    let tenant = app.tenant().await?;
    let env = made(&app, &tenant.key, "/environments", json!({})).await?;
    let session = made(&app, &tenant.key, &format!("/environments/{env}/sessions"), json!({})).await?;
    let runs = format!("/environments/{env}/sessions/{session}/runs");

    let (status, body) = send(
        app.v1(&tenant.key, Method::POST, &runs)
            .json(&json!({"model": "m", "input": "steer me", "steeringEnabled": true})),
    )
    .await?;
    refused(status, &body, "steeringEnabled")?;
    // Nothing was created: no Run, no sequence number taken.
    let (status, list) = send(app.v1(&tenant.key, Method::GET, &runs)).await?;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["data"], json!([]), "{list}");
    let (_, environment) = send(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}"))).await?;
    assert_eq!(environment["data"]["runCount"], 0, "{environment}");

    // `false` and absent are accepted, and the Run says it has no steering.
    for body in
        [json!({"model": "m", "input": "x", "steeringEnabled": false}), json!({"model": "m", "input": "x"})]
    {
        let (status, created) = send(app.v1(&tenant.key, Method::POST, &runs).json(&body)).await?;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}: {created}");
        assert_eq!(created["data"]["steeringEnabled"], false, "{created}");
    }
    let (_, environment) = send(app.v1(&tenant.key, Method::GET, &format!("/environments/{env}"))).await?;
    assert_eq!(environment["data"]["runCount"], 2, "{environment}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_query_parameter_a_route_does_not_take_is_a_400_naming_it() -> R {
    let app = TestApp::spawn_without_runs_consumer().await?;
    let tenant = app.tenant().await?;
    let env = made(&app, &tenant.key, "/environments", json!({})).await?;
    let session = made(&app, &tenant.key, &format!("/environments/{env}/sessions"), json!({})).await?;
    let runs = format!("/environments/{env}/sessions/{session}/runs");
    let run = made(&app, &tenant.key, &runs, json!({"model": "m", "input": "x"})).await?;

    let gets = [
        "/environments".to_owned(),
        format!("/environments/{env}"),
        format!("/environments/{env}/sessions"),
        format!("/environments/{env}/sessions/{session}"),
        runs.clone(),
        format!("{runs}/{run}"),
    ];
    for path in &gets {
        // The route answers without the parameter…
        let (status, body) = send(app.v1(&tenant.key, Method::GET, path)).await?;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        // …and refuses it with one it does not take, naming it.
        for (query, param) in [("include=usage", "include"), ("limit=1&sessionId=x", "sessionId")] {
            let (status, body) = send(app.v1(&tenant.key, Method::GET, &format!("{path}?{query}"))).await?;
            if query.starts_with("limit") && !path.ends_with("s") {
                // A single object's GET takes no `limit` either: the first unknown is named.
                refused(status, &body, "limit").map_err(|e| anyhow::anyhow!("{path}?{query}: {e}"))?;
            } else {
                refused(status, &body, param).map_err(|e| anyhow::anyhow!("{path}?{query}: {e}"))?;
            }
        }
    }
    // Lists still take their page parameters.
    let (status, body) = send(app.v1(&tenant.key, Method::GET, &format!("{runs}?limit=1&order=asc"))).await?;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"].as_array().map(Vec::len), Some(1), "{body}");

    // Stop with a query parameter changes nothing: the Run stays queued.
    let (status, body) =
        send(app.v1(&tenant.key, Method::POST, &format!("{runs}/{run}/stop?force=true"))).await?;
    refused(status, &body, "force")?;
    let (_, got) = send(app.v1(&tenant.key, Method::GET, &format!("{runs}/{run}"))).await?;
    assert_eq!(got["data"]["status"], "queued", "{got}");
    assert_eq!(got["data"]["stopRequested"], false, "{got}");
    Ok(())
}
