use agentplane_domain::agent::{Agent, Channel};
use agentplane_domain::agent_run::{AgentRun, RunId, RunStatus, StartRun};
use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_domain::session::Session;
use agentplane_domain::{ProjectId, SessionId};
use agentplane_store::StoreError;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;

use super::wire::{RunBody, RunsParams};
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::envelope::ErrorEnvelope;
use crate::list::{List, PageParams};
use crate::{App, edge};

/// What a turn route hands over to run in the background.
pub struct Queued<'a> {
    pub agent: &'a Agent,
    pub channel: Channel,
    pub version: Option<u32>,
    pub session: &'a Session,
    pub input: String,
    /// The input's image files (URLs are presigned when the run starts).
    pub image_files: Vec<agentplane_domain::file::FileId>,
    pub callback_url: Option<String>,
}

/// Queues a turn as a background run: the run is stored `queued` and its start message sent;
/// the `run-execution` job starts it once a slot of the tenant is free. A run whose message
/// could not be sent is recorded `failed` and the call answers 503 (nothing runs unseen).
pub async fn queue(
    app: &App,
    project: ProjectId,
    queued: Queued<'_>,
) -> Result<(StatusCode, Json<RunBody>), ClientError> {
    let agent = queued.agent;
    if !agent.execution.background_enabled {
        return Err(ClientError::BackgroundNotEnabled);
    }
    let now = edge::now();
    let ceiling = app.background.max_duration_ms.min(agent.execution.background_max_duration_ms).max(1000);
    let run = AgentRun {
        id: RunId::from_random(edge::random()?),
        project_id: project,
        session_id: queued.session.id,
        agent_id: agent.id,
        channel: queued.channel,
        version: queued.version,
        status: RunStatus::Queued,
        input: queued.input,
        image_files: queued.image_files,
        max_duration_ms: ceiling,
        // The request's callback, else the agent's default (read live, at queue time).
        callback_url: queued.callback_url.or_else(|| agent.execution.default_callback_url.clone()),
        created_at: now,
        started_at: None,
        ended_at: None,
        stop_reason: None,
        output_text: None,
        error: None,
        usage: Default::default(),
        cost_usd: 0.0,
        cancel_requested: false,
        pending_action_ids: Vec::new(),
        callback: None,
        lease_until: None,
        expires_at: now.plus_seconds(app.background.retention_days * 86_400),
    };
    // Its end is a signed delivery to the callback: the URL is checked and the project's
    // signer made before anything is queued.
    let callback_secret = match &run.callback_url {
        Some(url) => crate::webhooks::service::prepare_callback(app, project, url).await?,
        None => None,
    };
    let queued = agentplane_engine::background::run_event(&run)
        .ok_or_else(|| ClientError::internal("a queued run has an event type"))?;
    app.store.agent_runs().create(&run, &queued).await?;
    app.engine().dispatch(Some(queued)).await;
    let start = StartRun { project_id: project, run_id: run.id.clone() };
    if let Err(err) = app.engine().enqueue_run(&start, 0).await {
        tracing::error!(error = %err, run = %run.id, "could not queue a background run");
        let _ = app
            .store
            .agent_runs()
            .transition(&project, &run.id, RunStatus::Queued, RunStatus::Failed, None, now)
            .await;
        return Err(ClientError::Storage(err.into()));
    }
    Ok((StatusCode::ACCEPTED, Json(RunBody { callback_secret, ..RunBody::from(&run) })))
}

/// Cancels a run that is not running (`from`), with its `agent_run.canceled` event.
async fn cancel_event(
    app: &App,
    run: &AgentRun,
    from: RunStatus,
    now: agentplane_domain::Timestamp,
) -> Result<AgentRun, StoreError> {
    let event =
        agentplane_engine::background::run_event(&AgentRun { status: RunStatus::Canceled, ..run.clone() });
    let canceled = app
        .store
        .agent_runs()
        .transition(&run.project_id, &run.id, from, RunStatus::Canceled, event.as_ref(), now)
        .await?;
    app.engine().dispatch(event).await;
    Ok(canceled)
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
    let project = auth.project_id;
    let runs = app.store.agent_runs();
    // Each step is conditional on the status it read; a run that moved meanwhile is read again.
    for _ in 0..5 {
        let run = runs.get(&project, &id).await.or_not_found(ClientError::RunNotFound)?;
        let now = edge::now();
        let moved = match run.status {
            status if status.is_terminal() => return Err(ClientError::RunNotActive { run_status: status }),
            RunStatus::Queued => cancel_event(&app, &run, RunStatus::Queued, now).await,
            RunStatus::Running => {
                let run = match runs.request_cancel(&project, &id).await {
                    Ok(run) => run,
                    Err(StoreError::Conflict) => continue,
                    Err(err) => return Err(err.into()),
                };
                // The turn sees the cancel at its next step (no turn holds the session yet: the
                // executor's start checks `cancel_requested`).
                match app.store.sessions().cancel_turn(&project, &run.session_id, now).await {
                    Ok(_) | Err(StoreError::Conflict) | Err(StoreError::NotFound) => {}
                    Err(err) => return Err(err.into()),
                }
                return Ok(Json(RunBody::from(&run)));
            }
            RunStatus::RequiresAction => {
                let session = app.store.sessions().get(&project, &run.session_id).await;
                if let Ok(session) = session {
                    app.engine()
                        .cancel_paused(&project, &run.session_id, &run.id.turn_id(), session.last_event_seq)
                        .await?;
                }
                cancel_event(&app, &run, RunStatus::RequiresAction, now).await
            }
            _ => continue,
        };
        match moved {
            Ok(run) => return Ok(Json(RunBody::from(&run))),
            Err(StoreError::Conflict) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(ClientError::Storage(StoreError::unavailable("the run kept changing")))
}
