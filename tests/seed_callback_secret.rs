//! Seed 002: the project's callback secret (it signs background-run callbacks) is shown once,
//! in the answer of the request that made it (the project's first run with a callback), and
//! never again: not on the next run, not in reads. Rotating it shows the new one.

use agentplane_tests::model::{Reply, ScriptedModel};
use agentplane_tests::{TestApp, send, str_field};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type R = anyhow::Result<()>;

#[tokio::test]
async fn the_callback_secret_is_shown_once_when_first_made() -> R {
    let model = ScriptedModel::start().await?;
    let app = TestApp::spawn_with_model(&model).await?;
    let tenant = app.tenant().await?;
    let agent = app
        .create_agent(
            &tenant.key,
            json!({"name": "bg", "model": "gpt-4o-mini", "config": {"execution": {"background_enabled": true}}}),
        )
        .await?;
    let queue = |callback: Option<&str>| {
        let mut body = json!({"agent": agent, "input": "x", "background": true});
        if let Some(url) = callback {
            body["callback_url"] = json!(url);
        }
        send(app.client(&tenant.key, Method::POST, "/responses").json(&body))
    };
    model.push(Reply::text("one"));
    model.push(Reply::text("two"));
    model.push(Reply::text("three"));

    // A run without a callback makes no secret.
    let (status, plain) = queue(None).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{plain}");
    assert!(plain.get("callback_secret").is_none(), "{plain}");

    let (status, first) = queue(Some("https://caller.example/cb")).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    let secret = str_field(&first, "callback_secret")?;
    assert!(secret.starts_with("whsec_") && secret.len() > 40, "{secret}");

    // Never again: the next run with a callback, and reads of the first.
    let (status, second) = queue(Some("https://caller.example/cb")).await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{second}");
    assert!(second.get("callback_secret").is_none(), "{second}");
    let id = str_field(&first, "id")?;
    let (status, read) = send(app.client(&tenant.key, Method::GET, &format!("/runs/{id}"))).await?;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert!(!read.to_string().contains(&secret), "{read}");
    assert!(read.get("callback_secret").is_none(), "{read}");
    let (_, list) = send(app.client(&tenant.key, Method::GET, "/runs")).await?;
    assert!(!list.to_string().contains(&secret), "{list}");

    // Rotating shows the new secret, a different one.
    let (status, rotated) =
        send(app.client(&tenant.key, Method::POST, "/callback_secret").json(&json!({"overlapHours": 0})))
            .await?;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    assert_ne!(rotated["secret"], Value::String(secret));
    Ok(())
}
