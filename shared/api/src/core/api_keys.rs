//! POST /core/v1/projects/{project_id}/api_keys and DELETE …/api_keys/{key_id}.

use agentplane_domain::ApiKeyId;
use agentplane_domain::api_key::{ApiKey, ProjectKeySecret};
use agentplane_domain::project::Name;
use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;

use super::auth::CoreAdmin;
use super::error::{CoreError, Found};
use super::project_id;
use super::wire::{ApiKeyBody, CreateApiKey, CreatedApiKeyBody};
use crate::body::Wire;
use crate::envelope::ErrorEnvelope;
use crate::{App, edge};

/// Create a project API key. The key is in this answer only.
#[utoipa::path(
    post,
    path = "/core/v1/projects/{project_id}/api_keys",
    tag = "core",
    operation_id = "core-api-keys-create",
    params(("project_id" = String, Path, description = "The project the key is for; an unknown or malformed id answers 404.")),
    request_body = CreateApiKey,
    responses(
        (status = 201, description = "The new key, with its plaintext.", body = CreatedApiKeyBody),
        (status = 400, description = "The body is not a valid request.", body = ErrorEnvelope),
        (status = 404, description = "No such project.", body = ErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path(project): Path<String>,
    Wire(body, _): Wire<CreateApiKey, CoreError>,
) -> Result<(StatusCode, Json<CreatedApiKeyBody>), CoreError> {
    let project_id = project_id(&project)?;
    let name = Name::new("name", &body.name)?;
    let secret = ProjectKeySecret::from_random(edge::random()?);
    let key = ApiKey {
        id: ApiKeyId::from_random(edge::random()?),
        project_id,
        name,
        hint: secret.hint(),
        created_at: edge::now(),
        revoked_at: None,
    };
    app.store.api_keys().create(&key, &secret.hash()).await.or_not_found(CoreError::NotFound("project"))?;
    // The only time the plaintext key leaves the server.
    let body = CreatedApiKeyBody { api_key: ApiKeyBody::from(&key), key: secret.expose().to_owned() };
    Ok((StatusCode::CREATED, Json(body)))
}

/// Revoke a project API key. Revoking a revoked key answers it unchanged.
#[utoipa::path(
    delete,
    path = "/core/v1/projects/{project_id}/api_keys/{key_id}",
    tag = "core",
    operation_id = "core-api-keys-revoke",
    params(
        ("project_id" = String, Path, description = "The key's project."),
        ("key_id" = String, Path, description = "The key; one of another project, unknown or malformed answers 404."),
    ),
    responses(
        (status = 200, description = "The revoked key.", body = ApiKeyBody),
        (status = 404, description = "No such project or key.", body = ErrorEnvelope),
    ),
)]
pub async fn revoke(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path((project, key)): Path<(String, String)>,
) -> Result<Json<ApiKeyBody>, CoreError> {
    let project_id = project_id(&project)?;
    let key_id: ApiKeyId = key.parse().map_err(|_| CoreError::NotFound("api key"))?;
    let key = app
        .store
        .api_keys()
        .revoke(&project_id, &key_id, edge::now())
        .await
        .or_not_found(CoreError::NotFound("api key"))?;
    Ok(Json(ApiKeyBody::from(&key)))
}
