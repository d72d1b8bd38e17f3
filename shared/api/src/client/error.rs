//! How client API failures become the agent-runtime envelope: every status and code of this
//! surface is decided here.

use agentplane_store::StoreError;
use http::StatusCode;

use crate::envelope::ApiError;

pub fn invalid_api_key() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "authentication_error",
        "invalid_api_key",
        "missing, invalid or revoked API key",
    )
}

pub fn session_not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found_error", "session_not_found", "session not found")
}

pub fn cursor_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found_error",
        "cursor_not_found",
        "the `after` cursor names no item of this list",
    )
}

/// A store result: `NotFound` becomes `not_found()`, anything else a 503.
pub fn store(not_found: fn() -> ApiError) -> impl FnOnce(StoreError) -> ApiError {
    move |err| match err {
        StoreError::NotFound => not_found(),
        other => ApiError::storage(&other),
    }
}
