//! The E2B error format of the sandbox API, `{"code": <http status>, "message": …}`: every
//! status of this surface is decided here.

use agentplane_domain::ValidationError;
use agentplane_domain::sandbox::LifecycleError;
use agentplane_store::StoreError;
use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::json;

use crate::body::BodyError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxError {
    pub status: StatusCode,
    pub message: String,
}

impl SandboxError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }

    pub fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "missing, invalid or revoked API key")
    }

    pub fn sandbox_not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "sandbox not found")
    }

    pub fn process_not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "process not found")
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    pub fn storage(err: &StoreError) -> Self {
        tracing::error!(error = %err, "storage call failed");
        Self::unavailable("storage is unavailable; try again")
    }

    pub fn internal(what: &str) -> Self {
        tracing::error!(what, "internal error");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    }

    /// A store result about a sandbox: `NotFound` is a 404, the rest a 503.
    pub fn store(err: StoreError) -> Self {
        match err {
            StoreError::NotFound => Self::sandbox_not_found(),
            other => Self::storage(&other),
        }
    }
}

impl IntoResponse for SandboxError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "code": self.status.as_u16(), "message": self.message }))).into_response()
    }
}

impl From<BodyError> for SandboxError {
    fn from(err: BodyError) -> Self {
        match err {
            BodyError::TooLarge => Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body exceeds {} bytes", crate::body::MAX_BODY_BYTES),
            ),
            BodyError::Unreadable => Self::bad_request("the request body could not be read"),
            BodyError::InvalidJson(detail) => {
                Self::bad_request(format!("the request body is not valid JSON: {detail}"))
            }
            BodyError::NotAnObject => Self::bad_request("the request body must be a JSON object"),
        }
    }
}

impl From<ValidationError> for SandboxError {
    fn from(err: ValidationError) -> Self {
        Self::bad_request(err.message)
    }
}

impl From<LifecycleError> for SandboxError {
    fn from(err: LifecycleError) -> Self {
        Self::conflict(err.to_string())
    }
}
