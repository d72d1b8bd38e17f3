//! GET /core/v1/projects/{project_id}/sessions/{session_id}/runtime-observation

use agentplane_domain::query::Query;
use agentplane_domain::session::EnvironmentMode;
use agentplane_domain::telemetry::RuntimeObservation;
use agentplane_domain::telemetry::observation::reject_query_parameters;
use axum::Json;
use axum::extract::{Path, RawQuery, State};

use super::{ids, observe};
use crate::core::auth::CoreAdmin;
use crate::core::error::{CoreError, Found};
use crate::{App, edge};

#[utoipa::path(
    get,
    path = "/core/v1/projects/{project_id}/sessions/{session_id}/runtime-observation",
    tag = "core",
    operation_id = "core-runtime-observation-get",
    params(("project_id" = String, Path), ("session_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn retrieve(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path((project, session)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Json<RuntimeObservation>, CoreError> {
    reject_query_parameters(&Query::parse(raw.as_deref())).map_err(CoreError::UnsupportedParameter)?;
    let (project, session) = ids(&project, &session)?;
    let session = app.store.sessions().get(&project, &session).await.or_not_found("session")?;
    let allocation = match session.environment_mode {
        EnvironmentMode::OpenaiHosted => app.store.allocations().get(&project, &session.id).await?,
        EnvironmentMode::None | EnvironmentMode::SelfHosted => None,
    };
    let observation = observe(&app, &session, allocation.as_ref(), edge::now()).await?;
    Ok(Json(observation.split().0))
}
