//! POST /core/v1/projects/{project_id}/api_keys and DELETE …/api_keys/{key_id}.

use agentplane_domain::api_key::{ApiKey, ProjectKeySecret};
use agentplane_domain::project::Name;
use agentplane_domain::{ApiKeyId, ProjectId};
use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;
use serde_json::{Value, json};

use super::auth::CoreAdmin;
use super::error::{CoreError, Found};
use crate::body::JsonObject;
use crate::{App, edge};

pub fn render(key: &ApiKey) -> Value {
    json!({
        "id": key.id,
        "object": "api_key",
        "project_id": key.project_id,
        "name": key.name.as_str(),
        "hint": key.hint,
        "created_at": key.created_at.unix_seconds(),
        "revoked_at": key.revoked_at.map(|t| t.unix_seconds()),
    })
}

fn project_id(text: &str) -> Result<ProjectId, CoreError> {
    text.parse().map_err(|_| CoreError::NotFound("project"))
}

#[utoipa::path(
    post,
    path = "/core/v1/projects/{project_id}/api_keys",
    tag = "core",
    operation_id = "core-api-keys-create",
    params(("project_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn create(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path(project): Path<String>,
    JsonObject(body, _): JsonObject<CoreError>,
) -> Result<(StatusCode, Json<Value>), CoreError> {
    let project_id = project_id(&project)?;
    let name = Name::from_json("name", body.get("name"))?;
    let secret = ProjectKeySecret::from_random(edge::random()?);
    let key = ApiKey {
        id: ApiKeyId::from_random(edge::random()?),
        project_id,
        name,
        hint: secret.hint(),
        created_at: edge::now(),
        revoked_at: None,
    };
    app.store.api_keys().create(&key, &secret.hash()).await.or_not_found("project")?;
    let mut body = render(&key);
    // The only time the plaintext key leaves the server.
    body["key"] = json!(secret.expose());
    Ok((StatusCode::CREATED, Json(body)))
}

#[utoipa::path(
    delete,
    path = "/core/v1/projects/{project_id}/api_keys/{key_id}",
    tag = "core",
    operation_id = "core-api-keys-revoke",
    params(("project_id" = String, Path), ("key_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn revoke(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path((project, key)): Path<(String, String)>,
) -> Result<Json<Value>, CoreError> {
    let project_id = project_id(&project)?;
    let key_id: ApiKeyId = key.parse().map_err(|_| CoreError::NotFound("api key"))?;
    let key = app.store.api_keys().revoke(&project_id, &key_id, edge::now()).await.or_not_found("api key")?;
    Ok(Json(render(&key)))
}
