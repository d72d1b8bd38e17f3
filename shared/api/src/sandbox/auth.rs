//! The sandbox API takes the project key in `X-API-Key` (E2B's header) or as a bearer token.

use axum::extract::FromRequestParts;
use http::request::Parts;

use super::error::SandboxError;
use crate::App;
use crate::client::auth::{KeyRefusal, ProjectAuth, check_key};
use crate::core::auth::bearer;

pub struct SandboxAuth(pub ProjectAuth);

impl FromRequestParts<App> for SandboxAuth {
    type Rejection = SandboxError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, SandboxError> {
        let header = parts.headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim);
        let token =
            header.filter(|t| !t.is_empty()).or_else(|| bearer(parts)).ok_or(SandboxError::Unauthorized)?;
        match check_key(app, token).await {
            Ok(auth) => Ok(Self(auth)),
            Err(KeyRefusal::Invalid) => Err(SandboxError::Unauthorized),
            Err(KeyRefusal::RateLimited { limit, retry_after_s }) => Err(SandboxError::RateLimited {
                max_requests: limit.max,
                window_seconds: limit.window_s,
                retry_after_s,
            }),
            Err(KeyRefusal::Storage(err)) => Err(SandboxError::Storage(err)),
        }
    }
}
