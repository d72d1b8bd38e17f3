//! `Authorization: Bearer cpeer_…`: the key's SHA-256 is looked up; a revoked key's lookup item
//! is gone, so revocation is immediate.

use agentplane_domain::api_key::{KeyHash, looks_like_project_key};
use agentplane_domain::{ApiKeyId, ProjectId};
use axum::extract::FromRequestParts;
use http::request::Parts;

use super::error::invalid_api_key;
use crate::App;
use crate::core::auth::bearer;
use crate::envelope::ApiError;

/// The project a request acts for.
#[derive(Debug, Clone, Copy)]
pub struct ProjectAuth {
    pub project_id: ProjectId,
    pub key_id: ApiKeyId,
}

impl FromRequestParts<App> for ProjectAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, ApiError> {
        let token = bearer(parts).ok_or_else(invalid_api_key)?;
        authenticate(app, token).await
    }
}

/// Shared with surfaces that also accept the key in other headers (the sandbox API's X-API-Key).
pub async fn authenticate(app: &App, token: &str) -> Result<ProjectAuth, ApiError> {
    if !looks_like_project_key(token) {
        return Err(invalid_api_key());
    }
    match app.store.api_keys().authenticate(&KeyHash::of(token)).await {
        Ok(Some((project_id, key_id))) => Ok(ProjectAuth { project_id, key_id }),
        Ok(None) => Err(invalid_api_key()),
        Err(err) => Err(ApiError::storage(&err)),
    }
}
