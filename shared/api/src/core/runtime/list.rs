//! GET /core/v1/sandbox/runtime-observations: one row per live Session of every Project, keyset
//! pages by Session creation time and id. The page is collected within a budget; past it the
//! answer is 503 `execution_unavailable` rather than a partial page.

use agentplane_domain::SessionId;
use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_domain::session::EnvironmentMode;
use agentplane_domain::telemetry::RuntimeObservationList;
use agentplane_domain::telemetry::observation_wire::RuntimeObservationRow;
use axum::Json;
use axum::extract::{RawQuery, State};

use super::observe;
use super::wire::{RuntimeObservationRowBody, observation_list};
use crate::core::auth::CoreAdmin;
use crate::core::error::{CoreError, Found};
use crate::envelope::ErrorEnvelope;
use crate::list::{List, PageParams};
use crate::{App, edge};

#[utoipa::path(
    get,
    path = "/core/v1/sandbox/runtime-observations",
    tag = "core",
    operation_id = "core-runtime-observations-list",
    params(PageParams),
    responses(
        (status = 200, description = "A page of observations, one row per Session that is not deleted.", body = List<RuntimeObservationRowBody>),
        (status = 400, description = "A page parameter is invalid or repeated.", body = ErrorEnvelope),
        (status = 404, description = "`after` names no Session.", body = ErrorEnvelope),
        (status = 500, description = "`internal_error`: inconsistent identity or invalid provider evidence.", body = ErrorEnvelope),
        (status = 503, description = "`execution_unavailable` (the page exceeded its collection budget) or `service_unavailable`.", body = ErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    _admin: CoreAdmin,
    RawQuery(raw): RawQuery,
) -> Result<Json<List<RuntimeObservationRowBody>>, CoreError> {
    let page = PageRequest::from_query(&Query::parse(raw.as_deref()))?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<SessionId>().map_err(|_| CoreError::NotFound("cursor"))?),
        None => None,
    };
    let budget = app.runtime.list_budget;
    match tokio::time::timeout(budget, collect(&app, &page, after.as_ref())).await {
        Ok(result) => result.map(|list| Json(observation_list(list))),
        Err(_) => Err(CoreError::ExecutionUnavailable),
    }
}

async fn collect(
    app: &App,
    page: &PageRequest,
    after: Option<&SessionId>,
) -> Result<RuntimeObservationList, CoreError> {
    let found =
        app.store.sessions().list_all(page, after).await.or_not_found(CoreError::NotFound("cursor"))?;
    let managed: Vec<_> = found
        .items
        .iter()
        .filter(|s| s.environment_mode == EnvironmentMode::OpenaiHosted)
        .map(|s| (s.project_id, s.id))
        .collect();
    let allocations = if managed.is_empty() {
        Default::default()
    } else {
        app.store.allocations().get_many(&managed).await?
    };
    // Rows resolve concurrently; each has its own resolved_at.
    let rows = futures_util::future::join_all(found.items.iter().map(|session| {
        let allocation = allocations.get(&session.id);
        async move {
            let observation = observe(app, session, allocation, edge::now()).await?;
            Ok::<_, CoreError>(RuntimeObservationRow { project_id: session.project_id, observation })
        }
    }))
    .await
    .into_iter()
    .collect::<Result<Vec<_>, _>>()?;
    Ok(RuntimeObservationList::new(rows, found.has_more))
}
