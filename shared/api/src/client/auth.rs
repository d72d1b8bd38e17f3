//! `Authorization: Bearer cpeer_…`: the key's SHA-256 is looked up; a revoked key's lookup item
//! is gone, so revocation is immediate. The same lookup counts the request against the key's
//! rate limit (`App::rate_limit`), so the limit costs no round trip of its own within a window.

use agentplane_domain::api_key::{KeyHash, looks_like_project_key};
use agentplane_domain::quota::RateLimit;
use agentplane_domain::{ApiKeyId, ProjectId};
use agentplane_store::StoreError;
use agentplane_store::dynamo::api_keys::KeyCheck;
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
        Ok(check_key(app, token).await?)
    }
}

/// Why a presented project key does not admit the request; each surface renders it in its own
/// envelope.
#[derive(Debug)]
pub enum KeyRefusal {
    /// Missing, malformed, unknown or revoked: 401.
    Invalid,
    /// The key made its window's requests: 429 with `Retry-After`.
    RateLimited { limit: RateLimit, retry_after_s: u64 },
    /// The key could not be checked: 503.
    Storage(StoreError),
}

impl From<KeyRefusal> for ClientError {
    fn from(refusal: KeyRefusal) -> Self {
        match refusal {
            KeyRefusal::Invalid => ClientError::InvalidApiKey,
            KeyRefusal::RateLimited { limit, retry_after_s } => ClientError::RateLimited {
                max_requests: limit.max,
                window_seconds: limit.window_s,
                retry_after_s,
            },
            KeyRefusal::Storage(err) => err.into(),
        }
    }
}

/// Shared with surfaces that also accept the key in other headers (the sandbox API's X-API-Key).
pub async fn authenticate(app: &App, token: &str) -> Result<ProjectAuth, ApiError> {
    check_key(app, token).await.map_err(|refusal| ClientError::from(refusal).to_api_error())
}

/// The project `token` acts for, the request counted against the key's rate limit.
pub async fn check_key(app: &App, token: &str) -> Result<ProjectAuth, KeyRefusal> {
    if !looks_like_project_key(token) {
        return Err(KeyRefusal::Invalid);
    }
    let hash = KeyHash::of(token);
    let Some(limit) = app.rate_limit else {
        return match app.store.api_keys().authenticate(&hash).await {
            Ok(Some((project_id, key_id))) => Ok(authenticated(project_id, key_id)),
            Ok(None) => Err(KeyRefusal::Invalid),
            Err(err) => Err(KeyRefusal::Storage(err)),
        };
    };
    match app.store.api_keys().authenticate_counted(&hash, limit, crate::edge::now()).await {
        Ok(KeyCheck::Allowed(project_id, key_id)) => Ok(authenticated(project_id, key_id)),
        Ok(KeyCheck::Limited { retry_after_s }) => Err(KeyRefusal::RateLimited { limit, retry_after_s }),
        Ok(KeyCheck::Unknown) => Err(KeyRefusal::Invalid),
        Err(err) => Err(KeyRefusal::Storage(err)),
    }
}

/// The key's project, recorded on the request span: the Lambda functions' log lines carry it.
fn authenticated(project_id: ProjectId, key_id: ApiKeyId) -> ProjectAuth {
    tracing::Span::current().record("project", tracing::field::display(&project_id));
    ProjectAuth { project_id, key_id }
}
