//! `Authorization: Bearer cpeer_…`: the client surface's project key check.

use axum::extract::FromRequestParts;
use http::request::Parts;

use super::error::PlatformError;
use crate::App;
use crate::client::auth::{ProjectAuth, authenticate};
use crate::core::auth::bearer;

/// The project a `/v1` request acts for.
pub struct PlatformAuth(pub ProjectAuth);

impl FromRequestParts<App> for PlatformAuth {
    type Rejection = PlatformError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, PlatformError> {
        let token = bearer(parts).ok_or(PlatformError::InvalidToken)?;
        match authenticate(app, token).await {
            Ok(auth) => Ok(Self(auth)),
            Err(err) if err.status == http::StatusCode::UNAUTHORIZED => Err(PlatformError::InvalidToken),
            Err(err) => Err(PlatformError::Storage(agentplane_store::StoreError::unavailable(err.message))),
        }
    }
}
