//! `/v1/environments/{environmentId}/sessions/{sessionId}/runs`: create (202 `queued`, with its
//! `environmentSequence`), list, get, stop. The spec gives a Run two shapes: the GET shape
//! (with `usage`) and the stop/rollback shape (with `steeringEnabled`, `error`,
//! `contentDeletedAt`); extra fields appear in neither. Create answers the stop/rollback shape
//! (it has what the caller sent, `steeringEnabled` included); lists answer the GET shape.

mod wire;

pub use wire::*;

use agentplane_domain::page::PageRequest;
use agentplane_domain::platform::run::ExecuteRun;
use agentplane_domain::platform::run::{
    self, CheckpointStatus, DiffStatus, NewRun, Run, RunId, RunStatus, StopEffect,
};
use agentplane_store::{RunsMessage, StoreError};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;

use super::auth::PlatformAuth;
use super::error::{Found, PlatformError, PlatformErrorEnvelope};
use super::wire::{Data, ListPage, PAGE_PARAMS, Strict, only_query};
use crate::list::PageParams;
use crate::{App, edge};

fn run_id(text: &str) -> Result<RunId, PlatformError> {
    text.parse().map_err(|_| PlatformError::RunNotFound)
}

/// The Run `id` of session `session` of environment `environment` (each checked in turn:
/// another project's, environment's or session's is a 404).
pub async fn load(
    app: &App,
    auth: &PlatformAuth,
    environment: &str,
    session: &str,
    id: &str,
) -> Result<Run, PlatformError> {
    let session = super::sessions::load(app, auth, environment, session).await?;
    let id = run_id(id)?;
    let found =
        app.store.runs().get(&auth.0.project_id, &id).await.or_not_found(PlatformError::RunNotFound)?;
    if found.session_id != session.id {
        return Err(PlatformError::RunNotFound);
    }
    Ok(found)
}

/// Create a Run in a session: it waits `queued` for execution.
#[utoipa::path(
    post,
    path = "/v1/environments/{environmentId}/sessions/{sessionId}/runs",
    tag = "platform",
    operation_id = "platform-runs-create",
    params(
        ("environmentId" = String, Path, min_length = 1, description = "The environment's id."),
        ("sessionId" = String, Path, min_length = 1, description = "A session of that environment."),
    ),
    request_body(content = CreateRun, description = "Unknown fields are refused."),
    responses(
        (status = 202, description = "The Run, `queued`, with its `environmentSequence`.", body = Data<RunState>),
        (status = 400, description = "Invalid request (`details.param` names the field).", body = PlatformErrorEnvelope),
        (status = 404, description = "No such environment or session.", body = PlatformErrorEnvelope),
        (status = 409, description = "Too many concurrent creates in this environment; try again (`concurrent_update`).", body = PlatformErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    auth: PlatformAuth,
    Path((environment, session)): Path<(String, String)>,
    Strict(body): Strict<CreateRun>,
) -> Result<(StatusCode, Json<Data<RunState>>), PlatformError> {
    let session = super::sessions::load(&app, &auth, &environment, &session).await?;
    if body.steering_enabled == Some(true) {
        // Recording `true` would promise steering that nothing honours.
        return Err(PlatformError::invalid(
            "steeringEnabled",
            "native steering is not available on this deployment yet: send `steeringEnabled: false` or leave it out",
        ));
    }
    let files = body.files.unwrap_or_default().into_iter().map(|f| (f.path, f.sha256)).collect();
    let new = NewRun::new(&body.model, &body.input, files, false)?;
    let environment_id = session.environment_id.ok_or(PlatformError::SessionNotFound)?;
    let id = RunId::from_random(edge::random()?);
    for attempt in 0..16u64 {
        let environment = app
            .store
            .environments()
            .get(&auth.0.project_id, &environment_id)
            .await
            .or_not_found(PlatformError::EnvironmentNotFound)?;
        let previous = environment.run_count;
        let mut run = new.clone().into_run(
            id,
            auth.0.project_id,
            environment_id,
            session.id,
            previous + 1,
            edge::now(),
        );
        // The price its sandbox time is charged at, whatever the price is later.
        run.sandbox_usd_per_second = Some(app.sandbox_price);
        match app.store.runs().create(&run, previous).await {
            Ok(()) => {
                // Executed by the `run-execution` job. The create put the environment in the
                // outbox: a message that cannot be sent now is sent by the sweep, so the Run
                // exists (202) and still runs.
                let message = ExecuteRun { project_id: run.project_id, run_id: run.id };
                let sent = match app.store.runs_queue() {
                    Ok(queue) => queue.send_message(&RunsMessage::PlatformRun(message)).await,
                    Err(err) => Err(err),
                };
                if let Err(err) = sent {
                    tracing::error!(error = %err, run = %run.id, "could not queue a Run's execution; the outbox sweep sends it");
                }
                return Ok((StatusCode::ACCEPTED, Data::of(state(&run))));
            }
            Err(StoreError::Conflict) => {
                // Another Run took the number (or the session is gone): read again.
                let jitter = u64::from(edge::random::<1>()?[0]) % 10;
                tokio::time::sleep(std::time::Duration::from_millis(5 * attempt + jitter)).await;
            }
            Err(err) => return Err(err.into()),
        }
    }
    Err(PlatformError::ConcurrentUpdate)
}

/// List a session's Runs, newest first (the GET shape).
#[utoipa::path(
    get,
    path = "/v1/environments/{environmentId}/sessions/{sessionId}/runs",
    tag = "platform",
    operation_id = "platform-runs-list",
    params(
        ("environmentId" = String, Path, min_length = 1, description = "The environment's id."),
        ("sessionId" = String, Path, min_length = 1, description = "A session of that environment."),
        PageParams,
    ),
    responses(
        (status = 200, description = "A page of Runs.", body = ListPage<RunDetails>),
        (status = 400, description = "A page parameter is invalid, or the query names another (`details.param` names it).", body = PlatformErrorEnvelope),
        (status = 404, description = "No such environment or session, or `after` names no Run of it (`cursor_not_found`).", body = PlatformErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: PlatformAuth,
    Path((environment, session)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Json<ListPage<RunDetails>>, PlatformError> {
    let page = PageRequest::from_query(&only_query(raw.as_deref(), PAGE_PARAMS)?)?;
    let session = super::sessions::load(&app, &auth, &environment, &session).await?;
    let environment_id = session.environment_id.ok_or(PlatformError::SessionNotFound)?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<RunId>().map_err(|_| PlatformError::CursorNotFound)?),
        None => None,
    };
    let found = app
        .store
        .runs()
        .list_session(&auth.0.project_id, &environment_id, &session.id, &page, after.as_ref())
        .await
        .or_not_found(PlatformError::CursorNotFound)?;
    Ok(ListPage::of(&found, details, |r| r.id.to_string()))
}

/// Get Run state and Sandbox usage.
#[utoipa::path(
    get,
    path = "/v1/environments/{environmentId}/sessions/{sessionId}/runs/{runId}",
    tag = "platform",
    operation_id = "platform-runs-get",
    params(
        ("environmentId" = String, Path, min_length = 1, description = "Environment identifier."),
        ("sessionId" = String, Path, min_length = 1, description = "Existing Session identifier within the named Environment."),
        ("runId" = String, Path, min_length = 1, description = "Run identifier within the named Environment and Session."),
    ),
    responses(
        (status = 200, description = "Successful response.", body = Data<RunDetails>),
        (status = 400, description = "Invalid request: a query parameter (this route takes none; `details.param` names it).", body = PlatformErrorEnvelope),
        (status = 404, description = "Resource not found or outside token scope.", body = PlatformErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: PlatformAuth,
    Path((environment, session, id)): Path<(String, String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Data<RunDetails>>, PlatformError> {
    only_query(raw.as_deref(), &[])?;
    let run = load(&app, &auth, &environment, &session, &id).await?;
    Ok(Data::of(details(&run)))
}

/// Request Run stop.
///
/// A queued Run is stopped at once (it never runs); a running one records `stopRequested` and
/// stops at its next safe point; a finished one stays as it is.
#[utoipa::path(
    post,
    path = "/v1/environments/{environmentId}/sessions/{sessionId}/runs/{runId}/stop",
    tag = "platform",
    operation_id = "platform-runs-stop",
    params(
        ("environmentId" = String, Path, min_length = 1, description = "Environment identifier."),
        ("sessionId" = String, Path, min_length = 1, description = "Existing Session identifier within the named Environment."),
        ("runId" = String, Path, min_length = 1, description = "Run identifier within the named Environment and Session."),
    ),
    responses(
        (status = 202, description = "Accepted.", body = Data<RunState>),
        (status = 400, description = "Invalid request: a query parameter (this route takes none; `details.param` names it).", body = PlatformErrorEnvelope),
        (status = 404, description = "Resource not found or outside token scope.", body = PlatformErrorEnvelope),
        (status = 409, description = "The Run is reverting or reverted (`run_reverted`).", body = PlatformErrorEnvelope),
    ),
)]
pub async fn stop(
    State(app): State<App>,
    auth: PlatformAuth,
    Path((environment, session, id)): Path<(String, String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<(StatusCode, Json<Data<RunState>>), PlatformError> {
    only_query(raw.as_deref(), &[])?;
    let mut run = load(&app, &auth, &environment, &session, &id).await?;
    for _ in 0..8 {
        let expected = run.version;
        let now = edge::now();
        match run::stop_effect(&run) {
            StopEffect::Nothing => return Ok((StatusCode::ACCEPTED, Data::of(state(&run)))),
            StopEffect::Refused => return Err(PlatformError::RunReverted),
            StopEffect::StopNow => {
                run.status = RunStatus::Stopped;
                run.stop_requested = true;
                run.finished_at = Some(now);
                // It never ran: nothing changed and nothing is checkpointed.
                run.file_diff_status = DiffStatus::Ready;
                run.checkpoint.status = CheckpointStatus::Skipped;
            }
            StopEffect::Request => run.stop_requested = true,
        }
        run.version = expected + 1;
        let events: Vec<_> = agentplane_engine::platform::execute::run_event(&run).into_iter().collect();
        match app.store.runs().replace_emitting(&run, expected, &events).await {
            Ok(()) => {
                if let Err(err) = app.store.webhooks().dispatch(&events).await {
                    tracing::warn!(error = %err, "could not send a Run's webhook event");
                }
                if run.status == RunStatus::Running {
                    // The execution ends the turn at its next step (its watcher records the
                    // same cancel, should the turn not hold the session yet).
                    let holder = app.store.sessions().turn_holder(&run.project_id, &run.session_id).await;
                    if holder.is_ok_and(|h| h.turn_id.as_deref() == Some(run.turn_id().as_str())) {
                        let _ = app.store.sessions().cancel_turn(&run.project_id, &run.session_id, now).await;
                    }
                    // An executor that died holds no live lease: a delivery now takes the Run
                    // over and settles it `stopped`.
                    if let Err(err) = agentplane_engine::platform::execute::nudge(&app.store, &run).await {
                        tracing::warn!(error = %err, run = %run.id, "could not send a stopped Run's message");
                    }
                }
                return Ok((StatusCode::ACCEPTED, Data::of(state(&run))));
            }
            Err(StoreError::Conflict) => {
                run = app
                    .store
                    .runs()
                    .get(&auth.0.project_id, &run.id)
                    .await
                    .or_not_found(PlatformError::RunNotFound)?;
            }
            Err(err) => return Err(err.into()),
        }
    }
    Err(PlatformError::ConcurrentUpdate)
}
