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

pub fn agent_not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found_error", "agent_not_found", "agent not found")
}

pub fn session_busy() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "conflict_error",
        "session_busy",
        "a turn is already running in this session; wait for it to end",
    )
}

pub fn agent_not_published() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "conflict_error",
        "agent_not_published",
        "the agent has no published version; publish it, or call POST /api/client/v1/responses to run the draft",
    )
}

pub fn concurrent_update() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "conflict_error",
        "concurrent_update",
        "the agent changed meanwhile; try again",
    )
}
