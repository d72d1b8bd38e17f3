//! GET /core/v1/projects/{project_id}/sessions/{session_id}/runtime-history
//!
//! Order of checks: the query (400), the Project and Session (404), the mode (409), the stored
//! identity (the Session's Environment and its allocation, 500 when they disagree), whether Core
//! samples at all (503), then the samples. Allocation and provider identities come from the
//! stored records and samples, never from the query; samples that name another Environment or
//! another allocation than the Session's are an inconsistent identity too.

use agentplane_domain::query::Query;
use agentplane_domain::telemetry::history::retained_start;
use agentplane_domain::telemetry::observation::history_supported;
use agentplane_domain::telemetry::{HistoryQuery, build_runtime_history};
use axum::Json;
use axum::extract::{Path, RawQuery, State};

use super::wire::{HistoryParams, RuntimeHistoryBody};
use super::{check_identity, ids};
use crate::core::auth::CoreAdmin;
use crate::core::error::{CoreError, HistoryFound};
use crate::envelope::ErrorEnvelope;
use crate::{App, edge};

#[utoipa::path(
    get,
    path = "/core/v1/projects/{project_id}/sessions/{session_id}/runtime-history",
    tag = "core",
    operation_id = "core-runtime-history-get",
    params(
        ("project_id" = String, Path, description = "The Session's project; unknown or malformed answers 404."),
        ("session_id" = String, Path, description = "The Session; missing, malformed or another project's answers 404."),
        HistoryParams,
    ),
    responses(
        (status = 200, description = "The Session's stored Runtime history.", body = RuntimeHistoryBody),
        (status = 400, description = "`unsupported_parameter` (another or a repeated parameter) or `invalid_request` (an invalid range or `max_points`).", body = ErrorEnvelope),
        (status = 404, description = "No such project or Session.", body = ErrorEnvelope),
        (status = 409, description = "`runtime_history_unsupported`: the Session is not `openai_hosted`.", body = ErrorEnvelope),
        (status = 500, description = "`internal_error`: inconsistent stored identity.", body = ErrorEnvelope),
        (status = 503, description = "`runtime_history_unavailable`: Core samples no history, or the read failed or timed out.", body = ErrorEnvelope),
    ),
)]
pub async fn history(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path((project, session)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Json<RuntimeHistoryBody>, CoreError> {
    let now = edge::now();
    let query = HistoryQuery::from_query(&Query::parse(raw.as_deref()), now)?;
    let (project, session) = ids(&project, &session)?;
    // A failed read is 503 runtime_history_unavailable; its text is neither returned nor logged.
    let session = app.store.sessions().get(&project, &session).await.or_history_unavailable("session")?;
    if !history_supported(session.environment_mode) {
        return Err(CoreError::HistoryUnsupported);
    }
    // The Session's Environment, then its allocation, as the observation routes resolve them.
    let Some(environment) = session.environment_id else {
        return Err(CoreError::internal("openai_hosted session without an environment"));
    };
    let allocation = app
        .store
        .allocations()
        .get(&session.project_id, &session.id)
        .await
        .map_err(|_| CoreError::HistoryUnavailable)?;
    check_identity(&session, allocation.as_ref())?;
    if !app.runtime.history_enabled {
        return Err(CoreError::HistoryUnavailable);
    }
    let interval = app.runtime.interval;
    // One interval before the window too: the CPU baseline of an interval that ends in the first
    // bucket. Keys are interval starts, and a sample lies within its interval.
    let from = retained_start(query, now) - 2 * interval.seconds();
    let read = tokio::time::timeout(
        app.runtime.history_deadline,
        app.store.telemetry().samples(&session.id, from, query.end()),
    )
    .await;
    let samples = match read {
        Ok(Ok(read)) => read.samples,
        // Neither the storage error nor its text leaves this line.
        Ok(Err(_)) | Err(_) => return Err(CoreError::HistoryUnavailable),
    };
    let foreign = samples.iter().filter_map(|s| s.allocation.as_ref()).any(|a| {
        a.environment_id != environment
            || allocation.as_ref().is_none_or(|own| own.record.allocation_id != a.allocation_id)
    });
    if foreign {
        return Err(CoreError::internal("stored samples name another runtime identity"));
    }
    let history = build_runtime_history(session.id, query, interval, edge::now(), &samples)?;
    Ok(Json(RuntimeHistoryBody::from(&history)))
}
