//! The statuses and codes of the runtime telemetry routes (Core envelope).

use agentplane_domain::ValidationError;
use agentplane_domain::telemetry::{HistoryError, HistoryQueryError};
use agentplane_store::StoreError;
use http::StatusCode;

use crate::envelope::ApiError;

pub use crate::core::error::not_found;

fn with_param(error: ApiError, err: &ValidationError) -> ApiError {
    match &err.param {
        Some(param) => error.with("param", param.clone()),
        None => error,
    }
}

/// Single read: any query parameter.
pub fn unsupported_parameter(err: &ValidationError) -> ApiError {
    with_param(
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "unsupported_parameter",
            err.message.clone(),
        ),
        err,
    )
}

pub fn history_query(err: &HistoryQueryError) -> ApiError {
    let v = err.validation();
    with_param(
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", err.code(), v.message.clone()),
        v,
    )
}

pub fn history_unsupported() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "invalid_request_error",
        "runtime_history_unsupported",
        "runtime history exists only for openai_hosted sessions",
    )
}

/// History could not be read. The cause is never returned or logged (storage text may hold
/// provider or infrastructure detail).
pub fn history_unavailable() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "api_error",
        "runtime_history_unavailable",
        "runtime history is unavailable; try again later",
    )
}

pub fn history(err: &HistoryError) -> ApiError {
    match err {
        HistoryError::InconsistentIdentity(_) => internal("inconsistent stored runtime identity"),
        HistoryError::InvalidSample | HistoryError::TooLarge => history_unavailable(),
    }
}

pub fn execution_unavailable() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "api_error",
        "execution_unavailable",
        "the observation list exceeded its collection budget; try a smaller limit",
    )
}

pub fn internal(what: &str) -> ApiError {
    ApiError::internal(what)
}

/// A store read of the route's records: `NotFound` is `not_found(what)`.
pub fn store(what: &'static str) -> impl FnOnce(StoreError) -> ApiError {
    move |err| match err {
        StoreError::NotFound => not_found(what),
        other => ApiError::storage(&other),
    }
}
