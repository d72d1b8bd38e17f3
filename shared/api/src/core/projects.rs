//! POST /core/v1/projects and GET /core/v1/projects.

use agentplane_domain::ProjectId;
use agentplane_domain::page::PageRequest;
use agentplane_domain::project::{Name, Project};
use agentplane_domain::query::Query;
use axum::Json;
use axum::extract::{RawQuery, State};
use http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::CoreAdmin;
use super::error::{CoreError, Found};
use crate::body::Wire;
use crate::envelope::ErrorEnvelope;
use crate::list::{List, PageParams};
use crate::{App, edge};

/// `POST /core/v1/projects`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateProject {
    /// 1 to 128 characters once surrounding whitespace is trimmed.
    #[schema(min_length = 1, max_length = 128)]
    pub name: String,
}

/// A project.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProjectBody {
    #[schema(value_type = String)]
    pub id: ProjectId,
    /// Always `project`.
    #[schema(value_type = String, pattern = "^project$")]
    pub object: &'static str,
    pub name: String,
    /// Unix seconds.
    pub created_at: i64,
    /// The tenant the project belongs to; `null`: it is its own.
    #[schema(value_type = Option<String>)]
    pub tenant_id: Option<agentplane_domain::tenant::TenantId>,
}

impl From<&Project> for ProjectBody {
    fn from(project: &Project) -> Self {
        Self {
            id: project.id,
            object: "project",
            name: project.name.as_str().to_owned(),
            created_at: project.created_at.unix_seconds(),
            tenant_id: project.tenant_id,
        }
    }
}

/// Create a project.
#[utoipa::path(
    post,
    path = "/core/v1/projects",
    tag = "core",
    operation_id = "core-projects-create",
    request_body = CreateProject,
    responses(
        (status = 201, description = "The new project.", body = ProjectBody),
        (status = 400, description = "The body is not a valid request.", body = ErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    _admin: CoreAdmin,
    Wire(body, _): Wire<CreateProject, CoreError>,
) -> Result<(StatusCode, Json<ProjectBody>), CoreError> {
    let name = Name::new("name", &body.name)?;
    let id = ProjectId::from_random(edge::random()?);
    let project = Project { id, name, created_at: edge::now(), tenant_id: None };
    app.store.projects().create(&project).await?;
    Ok((StatusCode::CREATED, Json(ProjectBody::from(&project))))
}

/// List projects, newest first.
#[utoipa::path(
    get,
    path = "/core/v1/projects",
    tag = "core",
    operation_id = "core-projects-list",
    params(PageParams),
    responses(
        (status = 200, description = "A page of projects.", body = List<ProjectBody>),
        (status = 400, description = "A page parameter is invalid.", body = ErrorEnvelope),
        (status = 404, description = "`after` names no project.", body = ErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    _admin: CoreAdmin,
    RawQuery(raw): RawQuery,
) -> Result<Json<List<ProjectBody>>, CoreError> {
    let page = PageRequest::from_query(&Query::parse(raw.as_deref()))?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<ProjectId>().map_err(|_| CoreError::NotFound("cursor"))?),
        None => None,
    };
    let found =
        app.store.projects().list(&page, after.as_ref()).await.or_not_found(CoreError::NotFound("cursor"))?;
    Ok(Json(List::of(&found, |p| ProjectBody::from(p), |p| p.id.to_string())))
}
