//! How Core admin failures become the Core envelope: every status and code of this surface is
//! decided here.

use agentplane_store::StoreError;
use http::StatusCode;

use crate::envelope::ApiError;

pub fn invalid_admin_key() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "authentication_error",
        "invalid_admin_key",
        "missing or invalid Core key",
    )
}

pub fn not_found(what: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found_error", "not_found_error", format!("{what} not found"))
}

/// A store result for a read of `what`: `NotFound` is a 404 of this surface.
pub fn store(what: &str) -> impl FnOnce(StoreError) -> ApiError + '_ {
    move |err| match err {
        StoreError::NotFound => not_found(what),
        other => ApiError::storage(&other),
    }
}
