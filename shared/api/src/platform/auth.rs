//! `Authorization: Bearer cpeer_…`: the client surface's project key check.

use axum::extract::FromRequestParts;
use http::request::Parts;

use super::error::PlatformError;
use crate::App;
use crate::client::auth::{KeyRefusal, ProjectAuth, check_key};
use crate::core::auth::bearer;

/// The project a `/v1` request acts for.
pub struct PlatformAuth(pub ProjectAuth);

impl FromRequestParts<App> for PlatformAuth {
    type Rejection = PlatformError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, PlatformError> {
        let token = bearer(parts).ok_or(PlatformError::InvalidToken)?;
        match check_key(app, token).await {
            Ok(auth) => Ok(Self(auth)),
            Err(KeyRefusal::Invalid) => Err(PlatformError::InvalidToken),
            Err(KeyRefusal::RateLimited { limit, retry_after_s }) => Err(PlatformError::RateLimited {
                max_requests: limit.max,
                window_seconds: limit.window_s,
                retry_after_s,
            }),
            Err(KeyRefusal::Storage(err)) => Err(PlatformError::Storage(err)),
        }
    }
}
