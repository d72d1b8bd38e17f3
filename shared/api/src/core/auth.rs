//! `Authorization: Bearer <Core key>`, compared in constant time.

use axum::extract::FromRequestParts;
use http::request::Parts;

use super::error::invalid_admin_key;
use crate::App;
use crate::envelope::ApiError;

/// Proof that the request carried the Core key.
pub struct CoreAdmin;

impl FromRequestParts<App> for CoreAdmin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, ApiError> {
        let Some(expected) = app.core_key() else {
            tracing::warn!("a Core request arrived but no Core key is configured");
            return Err(invalid_admin_key());
        };
        let presented = bearer(parts).ok_or_else(invalid_admin_key)?;
        if expected.matches(presented) { Ok(CoreAdmin) } else { Err(invalid_admin_key()) }
    }
}

/// The token of an `Authorization: Bearer …` header (scheme case-insensitive).
pub fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}
