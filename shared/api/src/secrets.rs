//! Reading a secret's text again while the process lives: what lets a rotated secret take
//! effect without a redeploy.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::Context;

/// Reads a secret's current text (Secrets Manager in Lambda; anything in tests).
pub type SecretFetch =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = anyhow::Result<String>> + Send>> + Send + Sync>;

/// The text of the Secrets Manager secret `secret_id`, read on every call.
pub fn from_secrets_manager(sdk: &aws_config::SdkConfig, secret_id: &str) -> SecretFetch {
    let client = aws_sdk_secretsmanager::Client::new(sdk);
    let secret_id = secret_id.to_owned();
    Arc::new(move || {
        let client = client.clone();
        let secret_id = secret_id.clone();
        Box::pin(async move { secret_string(&client, &secret_id).await })
    })
}

/// The trimmed string value of a secret.
pub async fn secret_string(
    client: &aws_sdk_secretsmanager::Client,
    secret_id: &str,
) -> anyhow::Result<String> {
    let out = client.get_secret_value().secret_id(secret_id).send().await?;
    Ok(out.secret_string().context("the secret has no string value")?.trim().to_owned())
}
