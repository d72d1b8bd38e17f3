//! `/v1/environments/{environmentId}/sessions/{sessionId}/runs`: create (202 `queued`, with its
//! `environmentSequence`), list, get, stop. The spec gives a Run two shapes: the GET shape
//! (with `usage`) and the stop/rollback shape (with `steeringEnabled`, `error`,
//! `contentDeletedAt`); extra fields appear in neither. Create answers the stop/rollback shape
//! (it has what the caller sent, `steeringEnabled` included); lists answer the GET shape.

mod wire;

pub use wire::*;

use agentplane_domain::page::PageRequest;
use agentplane_domain::platform::run::{NewRun, Run, RunId};
use agentplane_engine::platform::submit::{self, Submission};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;

use super::auth::PlatformAuth;
use super::error::{Found, PlatformError, PlatformErrorEnvelope};
use super::wire::{Data, ListPage, PAGE_PARAMS, Strict, only_query};
use crate::App;
use crate::list::PageParams;

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
    let environment = session.environment_id.ok_or(PlatformError::SessionNotFound)?;
    let submission = Submission {
        project: auth.0.project_id,
        environment,
        session: session.id,
        new,
        sandbox_price: app.sandbox_price,
    };
    let run = submit::submit(&app.store, submission).await?;
    Ok((StatusCode::ACCEPTED, Data::of(state(&run))))
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
    let run = load(&app, &auth, &environment, &session, &id).await?;
    let run = submit::stop(&app.store, run).await?;
    Ok((StatusCode::ACCEPTED, Data::of(state(&run))))
}
