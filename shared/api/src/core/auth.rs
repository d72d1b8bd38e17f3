//! `Authorization: Bearer <Core key>`, compared in constant time with each key accepted now
//! (the current one, and the previous one during a rotation window; see `keys`).

use axum::extract::FromRequestParts;
use http::request::Parts;

use super::error::CoreError;
use crate::App;

/// Proof that the request carried the Core key.
pub struct CoreAdmin;

impl FromRequestParts<App> for CoreAdmin {
    type Rejection = CoreError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, CoreError> {
        let Some(keys) = app.core_keys() else {
            tracing::warn!("a Core request arrived but no Core key is configured");
            return Err(CoreError::InvalidAdminKey);
        };
        let presented = bearer(parts).ok_or(CoreError::InvalidAdminKey)?;
        if keys.accept(presented, crate::edge::now()).await {
            Ok(CoreAdmin)
        } else {
            Err(CoreError::InvalidAdminKey)
        }
    }
}

/// The token of an `Authorization: Bearer …` header (scheme case-insensitive).
pub fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}
