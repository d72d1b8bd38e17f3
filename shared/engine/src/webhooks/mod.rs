//! Sending webhook messages: the deployment's settings ([`WebhookConfig`]), secrets at rest
//! ([`seal`]), one delivery ([`deliver`]) and [`attempt`], which signs a message with the
//! endpoint's current secrets, delivers it, and records the attempt and what it means (a 410
//! disables the endpoint).
//!
//! Event emission (session.idled, action.required, agent_run.*) plugs in later: the emitter
//! writes a `Message` for every endpoint that `receives` the type and hands it to the webhooks
//! queue, whose job calls [`attempt`] and re-enqueues by `schedule::delay_after`.

pub mod deliver;
pub mod seal;

use std::sync::Arc;
use std::time::Duration;

use agentplane_domain::webhook::signature::{SigningSecret, sign};
use agentplane_domain::webhook::{self, Attempt, Endpoint, Message, Verdict};
use agentplane_store::{Store, StoreError};

pub use seal::{SealError, SealKey};

/// How long one delivery may take, unless configured otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The deployment's webhook settings.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// Seals the endpoints' signing secrets; `None` when the deployment configured none (webhook
    /// routes then answer 503).
    pub key: Option<Arc<SealKey>>,
    /// Whether endpoints may point at loopback, private and link-local addresses
    /// (`AGENTPLANE_WEBHOOKS_ALLOW_PRIVATE=1`: the local gateway and tests).
    pub allow_private: bool,
    /// One delivery's ceiling (connect, send, answer).
    pub timeout: Duration,
}

impl WebhookConfig {
    /// From `AGENTPLANE_WEBHOOK_SECRET_KEY` (base64 of 32 bytes) and
    /// `AGENTPLANE_WEBHOOKS_ALLOW_PRIVATE`; no key unless the variable holds one.
    pub fn from_env() -> Result<Self, SealError> {
        let key = match std::env::var("AGENTPLANE_WEBHOOK_SECRET_KEY") {
            Ok(text) => Some(Arc::new(SealKey::from_base64(&text)?)),
            Err(_) => None,
        };
        Ok(Self {
            key,
            allow_private: std::env::var("AGENTPLANE_WEBHOOKS_ALLOW_PRIVATE").as_deref() == Ok("1"),
            timeout: DEFAULT_TIMEOUT,
        })
    }
}

/// Why a message could not be attempted at all.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("webhooks are not configured (no secret key)")]
    NoKey,
    #[error(transparent)]
    Seal(#[from] SealError),
    #[error(transparent)]
    Storage(#[from] StoreError),
}

/// The secrets of `endpoint` that sign now, opened.
pub fn signing_secrets(
    key: &SealKey,
    endpoint: &Endpoint,
    now: agentplane_domain::Timestamp,
) -> Result<Vec<SigningSecret>, SendError> {
    let mut out = Vec::new();
    for stored in endpoint.signing_secrets(now) {
        let plain = key.open(endpoint.id.as_str(), &stored.sealed)?;
        let text = String::from_utf8(plain).map_err(|_| SealError::Open)?;
        out.push(SigningSecret::parse(&text).map_err(|_| SealError::Open)?);
    }
    Ok(out)
}

/// Delivers `message` to `endpoint` once and records the attempt and the message's new state;
/// a `410 Gone` disables the endpoint. Answers the attempt.
pub async fn attempt(
    store: &Store,
    config: &WebhookConfig,
    endpoint: &Endpoint,
    message: &mut Message,
) -> Result<Attempt, SendError> {
    let key = config.key.as_deref().ok_or(SendError::NoKey)?;
    let at = crate::now();
    let secrets = signing_secrets(key, endpoint, at)?;
    let headers = sign(message.id.as_str(), at.unix_seconds(), message.payload.as_bytes(), &secrets);
    let outcome =
        deliver::deliver(&endpoint.url, &headers, &message.payload, config.allow_private, config.timeout)
            .await;
    let attempt = Attempt {
        message_id: message.id.clone(),
        number: message.attempts + 1,
        at,
        status_code: outcome.status_code,
        duration_ms: outcome.duration_ms,
        error: outcome.error,
        response_excerpt: outcome.response_excerpt,
    };
    let verdict = webhook::settle(message, &attempt);
    store.webhooks().record_attempt(message, &attempt).await?;
    if verdict == Verdict::Gone {
        disable(store, endpoint).await?;
    }
    Ok(attempt)
}

/// Turns the endpoint off after a `410 Gone` (re-reading it if it changed meanwhile).
async fn disable(store: &Store, endpoint: &Endpoint) -> Result<(), StoreError> {
    for _ in 0..3 {
        let mut current = match store.webhooks().get(&endpoint.project_id, &endpoint.id).await {
            Ok(current) => current,
            Err(StoreError::NotFound) => return Ok(()),
            Err(err) => return Err(err),
        };
        let previous = current.updated_at;
        current.enabled = false;
        current.disabled_reason = Some("the endpoint answered 410 Gone".to_owned());
        current.updated_at = crate::now().max(previous.plus_millis(1));
        match store.webhooks().replace(&current, previous).await {
            Err(StoreError::Conflict) => continue,
            other => return other,
        }
    }
    Err(StoreError::Conflict)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_waits_ten_seconds_by_default() {
        assert_eq!(DEFAULT_TIMEOUT, Duration::from_secs(10));
    }
}
