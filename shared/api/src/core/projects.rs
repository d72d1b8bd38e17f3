//! POST /core/v1/projects and GET /core/v1/projects.

use agentplane_domain::ProjectId;
use agentplane_domain::page::PageRequest;
use agentplane_domain::project::{Name, Project};
use agentplane_domain::query::Query;
use axum::Json;
use axum::extract::{RawQuery, State};
use http::StatusCode;
use serde_json::{Value, json};

use super::auth::CoreAdmin;
use super::error::{CoreError, Found};
use crate::body::JsonObject;
use crate::{App, edge};

pub fn render(project: &Project) -> Value {
    json!({
        "id": project.id,
        "object": "project",
        "name": project.name.as_str(),
        "created_at": project.created_at.unix_seconds(),
    })
}

#[utoipa::path(
    post,
    path = "/core/v1/projects",
    tag = "core",
    operation_id = "core-projects-create",
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn create(
    State(app): State<App>,
    _admin: CoreAdmin,
    JsonObject(body, _): JsonObject<CoreError>,
) -> Result<(StatusCode, Json<Value>), CoreError> {
    let name = Name::from_json("name", body.get("name"))?;
    let id = ProjectId::from_random(edge::random()?);
    let project = Project { id, name, created_at: edge::now() };
    app.store.projects().create(&project).await?;
    Ok((StatusCode::CREATED, Json(render(&project))))
}

#[utoipa::path(
    get,
    path = "/core/v1/projects",
    tag = "core",
    operation_id = "core-projects-list",
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn list(
    State(app): State<App>,
    _admin: CoreAdmin,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, CoreError> {
    let page = PageRequest::from_query(&Query::parse(raw.as_deref()))?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<ProjectId>().map_err(|_| CoreError::NotFound("cursor"))?),
        None => None,
    };
    let found = app.store.projects().list(&page, after.as_ref()).await.or_not_found("cursor")?;
    Ok(Json(crate::list::body(&found, render, |p| p.id.to_string())))
}
