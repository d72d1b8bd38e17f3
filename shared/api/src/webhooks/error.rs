//! What managing a webhook endpoint can fail with, and the envelope each failure is answered
//! with on either surface.

use agentplane_domain::ValidationError;
use agentplane_domain::webhook::MAX_ENDPOINTS;
use agentplane_engine::webhooks::SendError;
use agentplane_store::StoreError;
use http::StatusCode;

use crate::envelope::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// 404 `webhook_not_found`: no such endpoint of this owner.
    #[error("webhook endpoint not found")]
    NotFound,
    /// 404 `webhook_message_not_found`.
    #[error("webhook message not found")]
    MessageNotFound,
    /// 404 `cursor_not_found`: `after` names no endpoint of this owner.
    #[error("cursor not found")]
    CursorNotFound,
    /// 409 `webhook_limit_reached`: the tenant (or lone project) has 50 endpoints.
    #[error("webhook endpoint limit reached")]
    LimitReached,
    /// 409 `concurrent_update`: the endpoint kept changing meanwhile.
    #[error("the endpoint changed meanwhile")]
    ConcurrentUpdate,
    /// 400 `url_not_allowed`, naming the parameter that gave the URL (`url`, `callback_url`,
    /// `config.execution.default_callback_url`).
    #[error("{message}")]
    UrlNotAllowed { param: &'static str, message: String },
    /// 503 `webhooks_unavailable`: the deployment has no webhook secret key.
    #[error("webhooks are not configured")]
    Unavailable,
    /// 400 `invalid_request_error`, naming the parameter.
    #[error(transparent)]
    Validation(#[from] ValidationError),
    /// 503 `service_unavailable`.
    #[error(transparent)]
    Storage(#[from] StoreError),
    /// 500 `internal_error`; the detail goes to the log only.
    #[error("internal error: {0}")]
    Internal(String),
}

impl WebhookError {
    pub fn to_api_error(self) -> ApiError {
        match self {
            Self::NotFound => ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "webhook_not_found",
                "webhook endpoint not found",
            ),
            Self::MessageNotFound => ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "webhook_message_not_found",
                "webhook message not found",
            ),
            Self::CursorNotFound => ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "cursor_not_found",
                "`after` names no endpoint of this list",
            ),
            Self::LimitReached => ApiError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "webhook_limit_reached",
                format!(
                    "the tenant has {MAX_ENDPOINTS} webhook endpoints (its own and its projects'; a project without a tenant counts alone), or the project the most the deployment allows it (AGENTPLANE_MAX_WEBHOOK_ENDPOINTS_PER_PROJECT), the most it may; delete one first"
                ),
            ),
            Self::ConcurrentUpdate => ApiError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "concurrent_update",
                "the endpoint changed meanwhile; try again",
            ),
            Self::UrlNotAllowed { param, message } => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", "url_not_allowed", message)
                    .with("param", param)
            }
            Self::Unavailable => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "webhooks_unavailable",
                "webhooks are not configured in this deployment",
            ),
            Self::Validation(err) => err.into(),
            Self::Storage(err) => ApiError::storage(&err),
            Self::Internal(what) => ApiError::internal(&what),
        }
    }
}

impl From<SendError> for WebhookError {
    fn from(err: SendError) -> Self {
        match err {
            SendError::NoKey => Self::Unavailable,
            SendError::Seal(err) => Self::Internal(err.to_string()),
            SendError::Storage(err) => Self::Storage(err.into()),
        }
    }
}

impl From<agentplane_engine::webhooks::reach::Unreachable> for WebhookError {
    fn from(err: agentplane_engine::webhooks::reach::Unreachable) -> Self {
        use agentplane_engine::webhooks::reach::Unreachable;
        match err {
            Unreachable::NotAllowed { param, message } => Self::UrlNotAllowed { param, message },
            Unreachable::Invalid(err) => Self::Validation(err),
        }
    }
}

impl From<agentplane_engine::webhooks::endpoints::EndpointError> for WebhookError {
    fn from(err: agentplane_engine::webhooks::endpoints::EndpointError) -> Self {
        use agentplane_engine::webhooks::endpoints::EndpointError;
        match err {
            EndpointError::NotFound => Self::NotFound,
            EndpointError::MessageNotFound => Self::MessageNotFound,
            EndpointError::LimitReached => Self::LimitReached,
            EndpointError::ConcurrentUpdate => Self::ConcurrentUpdate,
            EndpointError::NoKey => Self::Unavailable,
            EndpointError::Invalid(err) => Self::Validation(err),
            EndpointError::Unreachable(err) => err.into(),
            EndpointError::Secret(what) => Self::Internal(what),
            EndpointError::Send(err) => err.into(),
            EndpointError::Port(err) => err.into(),
        }
    }
}

/// A use case's port error is a storage error here.
impl From<agentplane_engine::ports::PortError> for WebhookError {
    fn from(err: agentplane_engine::ports::PortError) -> Self {
        Self::Storage(err.into())
    }
}

impl From<getrandom::Error> for WebhookError {
    fn from(_: getrandom::Error) -> Self {
        Self::Internal("randomness".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_has_its_status_and_code() {
        for (err, status, code) in [
            (WebhookError::NotFound, StatusCode::NOT_FOUND, "webhook_not_found"),
            (WebhookError::MessageNotFound, StatusCode::NOT_FOUND, "webhook_message_not_found"),
            (WebhookError::CursorNotFound, StatusCode::NOT_FOUND, "cursor_not_found"),
            (WebhookError::LimitReached, StatusCode::CONFLICT, "webhook_limit_reached"),
            (WebhookError::ConcurrentUpdate, StatusCode::CONFLICT, "concurrent_update"),
            (
                WebhookError::UrlNotAllowed { param: "url", message: "x".into() },
                StatusCode::BAD_REQUEST,
                "url_not_allowed",
            ),
            (WebhookError::Unavailable, StatusCode::SERVICE_UNAVAILABLE, "webhooks_unavailable"),
        ] {
            let api = err.to_api_error();
            assert_eq!((api.status, api.code), (status, code));
        }
    }
}
