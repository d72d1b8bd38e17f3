use agentplane_domain::agent_run::{RunId, RunStatus};
use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_domain::{ProjectId, SessionId};
use agentplane_engine::runs;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;

use super::wire::{RunBody, RunsParams};
use crate::App;
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::envelope::ErrorEnvelope;
use crate::list::{List, PageParams};

pub use agentplane_engine::runs::Queued;

/// Queues a turn as a background run: the run is stored `queued` and its start message sent;
/// the `run-execution` job starts it once a slot of the tenant is free. A run whose message
/// could not be sent is recorded `failed` and the call answers 503 (nothing runs unseen).
pub async fn queue(
    app: &App,
    project: ProjectId,
    queued: Queued<'_>,
) -> Result<(StatusCode, Json<RunBody>), ClientError> {
    let endpoints = crate::webhooks::service::endpoints(app);
    let done = runs::queue(app.engine(), &endpoints, &app.background, project, queued).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(RunBody { callback_secret: done.callback_secret, ..RunBody::from(&done.run) }),
    ))
}

/// A malformed run id is indistinguishable from a missing run.
fn run_id(text: &str) -> Result<RunId, ClientError> {
    text.parse().map_err(|_| ClientError::RunNotFound)
}

/// Retrieve a background run.
#[utoipa::path(
    get,
    path = "/api/client/v1/runs/{run_id}",
    tag = "client",
    operation_id = "client-runs-get",
    params(("run_id" = String, Path, description = "The run's id (`run_…`).")),
    responses(
        (status = 200, description = "The run.", body = RunBody),
        (status = 404, description = "No such run in this project (`run_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<RunBody>, ClientError> {
    let id = run_id(&id)?;
    let run =
        app.store.agent_runs().get(&auth.project_id, &id).await.or_not_found(ClientError::RunNotFound)?;
    Ok(Json(RunBody::from(&run)))
}

/// List the project's background runs, newest first.
#[utoipa::path(
    get,
    path = "/api/client/v1/runs",
    tag = "client",
    operation_id = "client-runs-list",
    params(RunsParams, PageParams),
    responses(
        (status = 200, description = "A page of runs.", body = List<RunBody>),
        (status = 400, description = "`status`, `session_id` or a page parameter is invalid (`param` names it).", body = ErrorEnvelope),
        (status = 404, description = "`after` names no run of this project (`cursor_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: ProjectAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<List<RunBody>>, ClientError> {
    let query = Query::parse(raw.as_deref());
    let page = PageRequest::from_query(&query)?;
    let status = match query.single("status")? {
        Some(text) => Some(RunStatus::parse(text).ok_or_else(|| {
            agentplane_domain::ValidationError::new(
                "status",
                "`status` must be one of queued, running, requires_action, succeeded, failed, canceled",
            )
        })?),
        None => None,
    };
    let session = match query.single("session_id")? {
        Some(text) => Some(text.parse::<SessionId>().map_err(|_| {
            agentplane_domain::ValidationError::new("session_id", "`session_id` must be a session id")
        })?),
        None => None,
    };
    let after = match &page.after {
        Some(text) => Some(text.parse::<RunId>().map_err(|_| ClientError::CursorNotFound)?),
        None => None,
    };
    let found = app
        .store
        .agent_runs()
        .list(&auth.project_id, &page, after.as_ref(), session.as_ref(), status)
        .await
        .or_not_found(ClientError::CursorNotFound)?;
    Ok(Json(List::of(&found, |r| RunBody::from(r), |r| r.id.to_string())))
}

/// Cancel a background run.
///
/// A queued run is `canceled` at once; so is one waiting for an action (its pending actions are
/// cancelled with its turn). A running run records the cancel (`cancel_requested`) and stops at
/// its next step, ending `canceled`, unless it ends on its own first: a run ends exactly once.
#[utoipa::path(
    post,
    path = "/api/client/v1/runs/{run_id}/cancel",
    tag = "client",
    operation_id = "client-runs-cancel",
    params(("run_id" = String, Path, description = "The run's id (`run_…`).")),
    responses(
        (status = 200, description = "The run as it is now (`canceled`, or `running` with `cancel_requested`).", body = RunBody),
        (status = 404, description = "No such run in this project (`run_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The run has ended (`run_not_active`, with its `run_status`).", body = ErrorEnvelope),
    ),
)]
pub async fn cancel(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<RunBody>, ClientError> {
    let id = run_id(&id)?;
    let run = runs::cancel(app.engine(), auth.project_id, &id).await?;
    Ok(Json(RunBody::from(&run)))
}
