//! `Authorization: Bearer cpeer_…`: the key's SHA-256 is looked up; a revoked key's lookup item
//! is gone, so revocation is immediate.

use agentplane_domain::api_key::{KeyHash, looks_like_project_key};
use agentplane_domain::{ApiKeyId, ProjectId};
use axum::extract::FromRequestParts;
use http::request::Parts;

use super::error::ClientError;
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
    type Rejection = ClientError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, ClientError> {
        let token = bearer(parts).ok_or(ClientError::InvalidApiKey)?;
        authenticate_key(app, token).await
    }
}

/// Shared with surfaces that also accept the key in other headers (the sandbox API's X-API-Key).
pub async fn authenticate(app: &App, token: &str) -> Result<ProjectAuth, ApiError> {
    Ok(authenticate_key(app, token).await?)
}

async fn authenticate_key(app: &App, token: &str) -> Result<ProjectAuth, ClientError> {
    if !looks_like_project_key(token) {
        return Err(ClientError::InvalidApiKey);
    }
    match app.store.api_keys().authenticate(&KeyHash::of(token)).await {
        Ok(Some((project_id, key_id))) => {
            // The Lambda functions' request span carries it into every later log line.
            tracing::Span::current().record("project", tracing::field::display(&project_id));
            Ok(ProjectAuth { project_id, key_id })
        }
        Ok(None) => Err(ClientError::InvalidApiKey),
        Err(err) => Err(err.into()),
    }
}
