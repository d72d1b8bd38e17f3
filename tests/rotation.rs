//! Secrets that rotate (README "Rotating secrets"): the Core key's rotation window, read from a
//! Secrets Manager secret (LocalStack's) that the test rotates while the app serves.

use std::time::Duration;

use agentplane_api::keys::RotatingKeys;
use agentplane_tests::{TestApp, endpoint, ensure_emulator, send, unique_prefix};
use anyhow::Context;
use reqwest::{Method, StatusCode};
use serde_json::json;

/// A fresh secret holding `text`, and a client to rotate it.
async fn secret(text: &str) -> anyhow::Result<(aws_sdk_secretsmanager::Client, String)> {
    ensure_emulator()?;
    let sdk = agentplane_store::aws::emulator_sdk_config(&endpoint()).await;
    let client = aws_sdk_secretsmanager::Client::new(&sdk);
    let name = format!("{}-core-key", unique_prefix());
    let out = client.create_secret().name(&name).secret_string(text).send().await.context("create secret")?;
    Ok((client, out.arn().unwrap_or(&name).to_owned()))
}

async fn put(client: &aws_sdk_secretsmanager::Client, id: &str, text: &str) -> anyhow::Result<()> {
    client.put_secret_value().secret_id(id).secret_string(text).send().await.context("put secret value")?;
    Ok(())
}

/// An app whose Core keys are read from the secret `id`, re-read after `ttl` and on a miss at
/// most once per `miss`.
async fn app_on_secret(id: &str, ttl: Duration, miss: Duration) -> anyhow::Result<TestApp> {
    let sdk = agentplane_store::aws::emulator_sdk_config(&endpoint()).await;
    let source = RotatingKeys::refreshing(agentplane_api::secrets::from_secrets_manager(&sdk, id))
        .await?
        .with_refresh(ttl, miss);
    TestApp::spawn_with(|app| app.with_core_keys(source)).await
}

async fn status_with(app: &TestApp, key: &str) -> anyhow::Result<StatusCode> {
    let (status, body) = send(app.request(Method::GET, "/core/v1/projects").bearer_auth(key)).await?;
    if status == StatusCode::UNAUTHORIZED {
        assert_eq!(body["error"]["code"], "invalid_admin_key", "{body}");
    }
    Ok(status)
}

const OLD: &str = "core_old_key_for_rotation_0001";
const NEW: &str = "core_new_key_for_rotation_0002";

#[tokio::test]
async fn a_plain_string_core_key_secret_still_works() -> anyhow::Result<()> {
    let (_client, id) = secret(&format!("  {OLD}\n")).await?;
    let app = app_on_secret(&id, Duration::from_secs(3600), Duration::ZERO).await?;
    assert_eq!(status_with(&app, OLD).await?, StatusCode::OK);
    assert_eq!(status_with(&app, NEW).await?, StatusCode::UNAUTHORIZED);
    Ok(())
}

#[tokio::test]
async fn both_core_keys_work_within_the_window_and_the_old_one_is_refused_after() -> anyhow::Result<()> {
    let (client, id) = secret(OLD).await?;
    // No TTL refresh during the test: the new key is picked up because it is unknown.
    let app = app_on_secret(&id, Duration::from_secs(3600), Duration::ZERO).await?;
    assert_eq!(status_with(&app, OLD).await?, StatusCode::OK);
    assert_eq!(status_with(&app, NEW).await?, StatusCode::UNAUTHORIZED);

    let until = agentplane_api::edge::now().plus_seconds(3);
    put(
        &client,
        &id,
        &json!({"current": NEW, "previous": OLD, "previous_until": until.rfc3339()}).to_string(),
    )
    .await?;
    assert_eq!(status_with(&app, NEW).await?, StatusCode::OK, "the new key, without a redeploy");
    assert_eq!(status_with(&app, OLD).await?, StatusCode::OK, "the old key within the window");
    let made =
        send(app.request(Method::POST, "/core/v1/projects").bearer_auth(OLD).json(&json!({"name": "p"})))
            .await?;
    assert_eq!(made.0, StatusCode::CREATED, "{}", made.1);

    tokio::time::sleep(Duration::from_millis(3200)).await;
    assert_eq!(status_with(&app, OLD).await?, StatusCode::UNAUTHORIZED, "the old key after the window");
    assert_eq!(status_with(&app, NEW).await?, StatusCode::OK);
    let (_, body) = send(app.request(Method::GET, "/core/v1/projects").bearer_auth(NEW)).await?;
    assert_eq!(
        body["data"].as_array().map(Vec::len),
        Some(1),
        "nothing was made with the refused key: {body}"
    );
    Ok(())
}

#[tokio::test]
async fn a_ttl_refresh_drops_a_previous_key_the_secret_no_longer_holds() -> anyhow::Result<()> {
    let far = agentplane_api::edge::now().plus_seconds(3600).rfc3339();
    let (client, id) =
        secret(&json!({"current": NEW, "previous": OLD, "previous_until": far}).to_string()).await?;
    let app = app_on_secret(&id, Duration::from_secs(1), Duration::from_secs(3600)).await?;
    assert_eq!(status_with(&app, OLD).await?, StatusCode::OK);
    // The rotation is finished early: the secret holds the new key alone.
    put(&client, &id, NEW).await?;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(status_with(&app, OLD).await?, StatusCode::UNAUTHORIZED);
    assert_eq!(status_with(&app, NEW).await?, StatusCode::OK);
    Ok(())
}

#[tokio::test]
async fn unknown_keys_re_read_the_secret_at_most_once_per_interval() -> anyhow::Result<()> {
    let (client, id) = secret(OLD).await?;
    let app = app_on_secret(&id, Duration::from_secs(3600), Duration::from_secs(3600)).await?;
    // A bad key spends this interval's re-read…
    assert_eq!(status_with(&app, "core_not_a_key_of_this_deployment").await?, StatusCode::UNAUTHORIZED);
    put(&client, &id, NEW).await?;
    // …so the next unknown key is refused without reading the secret again.
    assert_eq!(status_with(&app, NEW).await?, StatusCode::UNAUTHORIZED);
    assert_eq!(status_with(&app, OLD).await?, StatusCode::OK);
    Ok(())
}
