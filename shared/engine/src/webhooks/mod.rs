//! Sending webhook messages: the deployment's settings ([`WebhookConfig`]), secrets at rest
//! ([`seal`]), one delivery ([`deliver`]) and [`attempt`], which signs a message with the
//! endpoint's current secrets, delivers it, and records the attempt and what it means (a 410
//! disables the endpoint).
//!
//! Events are emitted by the state changes they report (see the store's `webhook_events`);
//! [`delivery`] fans them out into messages, makes the first attempt of each from the
//! `webhooks` queue and the later ones from the `webhook-retry` job.

pub mod deliver;
pub mod delivery;
pub mod endpoints;
pub mod reach;
pub mod reseal;
pub mod seal;

use std::sync::Arc;
use std::time::Duration;

use agentplane_domain::webhook::signature::{SigningSecret, sign};
use agentplane_domain::webhook::targets::{AllowListError, PrivateTargets};
use agentplane_domain::webhook::{self, Attempt, Endpoint, Message, Verdict};

use crate::ports::PortError;
use crate::ports::webhooks::WebhookAttempts;

pub use seal::{SealError, SealKey};

/// How long one delivery may take, unless configured otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The deployment's webhook settings.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// Seals the endpoints' signing secrets; `None` when the deployment configured none (webhook
    /// routes then answer 503).
    pub key: Option<Arc<SealKey>>,
    /// The non-public addresses deliveries may reach: none, unless listed
    /// (`AGENTPLANE_WEBHOOKS_ALLOWED_PRIVATE`, `host:port` entries); never the AWS endpoint's
    /// port or the gateway's own.
    pub targets: PrivateTargets,
    /// One delivery's ceiling (connect, send, answer).
    pub timeout: Duration,
    /// The retry schedule's delays are multiplied by this (1.0 deployed;
    /// `AGENTPLANE_WEBHOOK_RETRY_SCALE` shortens it for tests).
    pub retry_scale: f64,
    /// How long a first attempt (or an emitted event) may wait for its queue message before the
    /// retry job takes it up (`AGENTPLANE_WEBHOOK_QUEUE_GRACE_S`, default 60).
    pub queue_grace: Duration,
}

/// How long a first attempt waits for the queue by default before the retry job makes it.
pub const DEFAULT_QUEUE_GRACE: Duration = Duration::from_secs(60);

impl WebhookConfig {
    /// `targets` reachable beyond public hosts, the production schedule.
    pub fn new(key: Option<Arc<SealKey>>, targets: PrivateTargets) -> Self {
        Self { key, targets, timeout: DEFAULT_TIMEOUT, retry_scale: 1.0, queue_grace: DEFAULT_QUEUE_GRACE }
    }
}

fn env_f64(name: &str) -> Option<f64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse::<f64>().ok()).filter(|v| v.is_finite() && *v >= 0.0)
}

/// Why the webhook settings in the environment are unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("AGENTPLANE_WEBHOOK_SECRET_KEY: {0}")]
    Seal(#[from] SealError),
    #[error("AGENTPLANE_WEBHOOKS_ALLOWED_PRIVATE: {0}")]
    AllowList(#[from] AllowListError),
    #[error("AGENTPLANE_WEBHOOKS_ALLOWED_PRIVATE lists a port webhooks never reach: {0}")]
    Refused(String),
}

/// The port of an endpoint URL (`AWS_ENDPOINT_URL`, say), when it names one or its scheme does.
pub fn url_port(url: &str) -> Option<u16> {
    agentplane_domain::webhook::check_url(url).ok().map(|t| t.port)
}

/// The non-public targets of the allow-list `list` (`host:port`, comma-separated), never
/// reaching the `refused` ports (`(port, what listens there)`); an entry on a refused port is
/// an error, so that nobody counts on a receiver that is never reached.
pub fn private_targets(list: &str, refused: &[(u16, &str)]) -> Result<PrivateTargets, ConfigError> {
    let mut targets = PrivateTargets::parse(list)?;
    for (port, what) in refused {
        targets = targets.refusing(*port, what);
    }
    match targets.conflicts().as_slice() {
        [] => Ok(targets),
        conflicts => Err(ConfigError::Refused(conflicts.join("; "))),
    }
}

/// [`private_targets`] of `AGENTPLANE_WEBHOOKS_ALLOWED_PRIVATE` (empty when unset), refusing
/// the port of `AWS_ENDPOINT_URL` when it is set, and the caller's own `refused` ports.
pub fn private_targets_from_env(refused: &[(u16, &str)]) -> Result<PrivateTargets, ConfigError> {
    if std::env::var_os("AGENTPLANE_WEBHOOKS_ALLOW_PRIVATE").is_some() {
        tracing::warn!(
            "AGENTPLANE_WEBHOOKS_ALLOW_PRIVATE is no longer read: list the receivers in AGENTPLANE_WEBHOOKS_ALLOWED_PRIVATE (host:port,…)"
        );
    }
    let list = std::env::var("AGENTPLANE_WEBHOOKS_ALLOWED_PRIVATE").unwrap_or_default();
    let mut all = refused.to_vec();
    if let Some(port) = std::env::var("AWS_ENDPOINT_URL").ok().as_deref().and_then(url_port) {
        all.push((port, "the AWS endpoint"));
    }
    private_targets(&list, &all)
}

impl WebhookConfig {
    /// From `AGENTPLANE_WEBHOOK_SECRET_KEY` (base64 of 32 bytes) and the non-public targets of
    /// [`private_targets_from_env`]; no key unless the variable holds one.
    pub fn from_env() -> Result<Self, ConfigError> {
        let key = match std::env::var("AGENTPLANE_WEBHOOK_SECRET_KEY") {
            // Base64 of 32 bytes, or the key versions object (see `seal`).
            Ok(text) if text.trim_start().starts_with('{') => {
                Some(Arc::new(SealKey::from_secret_text(&text)?))
            }
            Ok(text) => Some(Arc::new(SealKey::from_base64(&text)?)),
            Err(_) => None,
        };
        let mut config = Self::new(key, private_targets_from_env(&[])?);
        if let Some(scale) = env_f64("AGENTPLANE_WEBHOOK_RETRY_SCALE") {
            config.retry_scale = scale;
        }
        if let Some(grace) = env_f64("AGENTPLANE_WEBHOOK_QUEUE_GRACE_S") {
            config.queue_grace = Duration::from_secs_f64(grace.min(3600.0));
        }
        Ok(config)
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
    Storage(#[from] PortError),
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
pub async fn attempt<S: WebhookAttempts>(
    store: &S,
    config: &WebhookConfig,
    endpoint: &Endpoint,
    message: &mut Message,
) -> Result<Attempt, SendError> {
    let attempt = send_once(config, endpoint, message).await?;
    let verdict = webhook::settle_scaled(message, &attempt, config.retry_scale);
    store.record_attempt(message, &attempt).await?;
    if verdict == Verdict::Gone && !endpoint.callback {
        disable(store, endpoint).await?;
    }
    Ok(attempt)
}

/// Signs `message` with the endpoint's current secrets and delivers it once: the attempt after
/// the `message.attempts` made.
pub(crate) async fn send_once(
    config: &WebhookConfig,
    endpoint: &Endpoint,
    message: &Message,
) -> Result<Attempt, SendError> {
    let key = config.key.as_deref().ok_or(SendError::NoKey)?;
    let at = crate::now();
    let secrets = signing_secrets(key, endpoint, at)?;
    let headers = sign(message.id.as_str(), at.unix_seconds(), message.payload.as_bytes(), &secrets);
    let url = message.url.as_deref().unwrap_or(&endpoint.url);
    let outcome = deliver::deliver(url, &headers, &message.payload, &config.targets, config.timeout).await;
    Ok(Attempt {
        message_id: message.id.clone(),
        number: message.attempts + 1,
        at,
        status_code: outcome.status_code,
        duration_ms: outcome.duration_ms,
        error: outcome.error,
        response_excerpt: outcome.response_excerpt,
    })
}

/// Turns the endpoint off after a `410 Gone` (re-reading it if it changed meanwhile).
pub(crate) async fn disable<S: WebhookAttempts>(store: &S, endpoint: &Endpoint) -> Result<(), PortError> {
    for _ in 0..3 {
        let mut current = match store.endpoint(&endpoint.owner, &endpoint.id).await {
            Ok(current) => current,
            Err(PortError::NotFound) => return Ok(()),
            Err(err) => return Err(err),
        };
        let previous = current.updated_at;
        current.enabled = false;
        current.disabled_reason = Some("the endpoint answered 410 Gone".to_owned());
        current.updated_at = crate::now().max(previous.plus_millis(1));
        match store.replace_endpoint(&current, previous).await {
            Err(PortError::Conflict) => continue,
            Ok(()) => {
                // An operator's alarm (the Lambda functions turn this event into a CloudWatch
                // metric: functions/src/metrics.rs).
                tracing::warn!(
                    target: "agentplane::metric",
                    metric = "WebhookEndpointsDisabled",
                    endpoint = %endpoint.id,
                    "a webhook endpoint answered 410 Gone and was disabled"
                );
                return Ok(());
            }
            other => return other,
        }
    }
    Err(PortError::Conflict)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_waits_ten_seconds_by_default() {
        assert_eq!(DEFAULT_TIMEOUT, Duration::from_secs(10));
    }
}
