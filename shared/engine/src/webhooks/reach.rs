//! Whether a URL a client gives may receive deliveries: checked when an endpoint, a run's
//! `callback_url` or an agent's `default_callback_url` is set (and again at every delivery).

use agentplane_domain::{ValidationError, webhook};

use super::WebhookConfig;
use super::deliver::{TargetError, resolve};

/// Why a URL may not receive deliveries.
#[derive(Debug, thiserror::Error)]
pub enum Unreachable {
    /// The host is, or resolves to, an address deliveries may not reach.
    #[error("{message}")]
    NotAllowed { param: &'static str, message: String },
    /// The URL is not an absolute http(s) URL.
    #[error(transparent)]
    Invalid(ValidationError),
}

/// Refuses a URL whose host is or resolves to an address deliveries may not reach, naming the
/// parameter `param` that gave it. A name that does not resolve yet is accepted: its deliveries
/// fail.
pub async fn check_reachable(
    config: &WebhookConfig,
    param: &'static str,
    url: &str,
) -> Result<(), Unreachable> {
    match resolve(url, &config.targets, config.timeout).await {
        Ok(_) | Err(TargetError::Unresolvable(_)) => Ok(()),
        Err(TargetError::NotAllowed { host, reason }) => Err(Unreachable::NotAllowed {
            param,
            message: format!(
                "`{param}` points at {host}, {reason}; webhooks go to public hosts and the deployment's allow-listed receivers"
            ),
        }),
        Err(TargetError::Invalid(_)) => {
            // The same rules as `resolve`'s, with the message naming `param`.
            let message = webhook::check_url_as(param, url)
                .err()
                .map_or_else(|| format!("`{param}` must be an absolute http(s) URL"), |e| e.message);
            Err(Unreachable::Invalid(ValidationError::new(param, message)))
        }
    }
}
