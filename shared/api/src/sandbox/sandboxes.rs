//! POST/GET /sandbox/v1/sandboxes, GET/DELETE …/{id}, POST …/{id}/pause, …/resume, …/timeout.
//! The lifecycle's use cases are the engine's ([`agentplane_engine::sandboxes`]); a handler
//! reads the caller's sandbox, checks that its lifecycle is the client's to change, calls one.

use agentplane_domain::page::PageLimit;
use agentplane_domain::sandbox::request::CreateSandbox;
use agentplane_domain::sandbox::{ENVIRONMENT_METADATA_KEY, Sandbox, SandboxId, TimeoutSeconds};
use agentplane_engine::sandboxes;
use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;

use super::auth::SandboxAuth;
use super::e2b;
use super::error::E2bError;
use super::error::SandboxError;
use super::wire;
use crate::body::Wire;
use crate::{App, edge};

pub use agentplane_engine::sandboxes::Launch;

/// A malformed id is indistinguishable from a missing sandbox.
pub fn sandbox_id(text: &str) -> Result<SandboxId, SandboxError> {
    text.parse().map_err(|_| SandboxError::SandboxNotFound)
}

pub async fn load(app: &App, auth: &SandboxAuth, id: &str) -> Result<Sandbox, SandboxError> {
    let id = sandbox_id(id)?;
    app.store.sandboxes().get(&auth.0.project_id, &id).await.map_err(SandboxError::sandbox_lookup)
}

/// Create a sandbox on the online node heard from most recently, and wait until it runs.
#[utoipa::path(
    post,
    path = "/sandbox/v1/sandboxes",
    tag = "sandbox",
    operation_id = "sandbox-create",
    request_body = wire::NewSandbox,
    responses(
        (status = 201, description = "The sandbox runs.", body = wire::Sandbox),
        (status = 400, description = "The body is not a valid request.", body = E2bError),
        (status = 429, description = "The project has its most live sandboxes (`AGENTPLANE_MAX_SANDBOXES_PER_PROJECT`, default 20); no `Retry-After`: a kill frees a place.", body = E2bError),
        (status = 500, description = "An internal error.", body = E2bError),
        (status = 503, description = "No node is online, the node did not answer in time or refused, the deployment has no sealing key, or storage is unavailable.", body = E2bError),
    ),
)]
pub async fn create(
    State(app): State<App>,
    auth: SandboxAuth,
    Wire(body, _): Wire<wire::NewSandbox, SandboxError>,
) -> Result<(StatusCode, Json<wire::Sandbox>), SandboxError> {
    let new = CreateSandbox::try_from(body)?;
    let sandbox = e2b::launch_with_token(&app, auth.0.project_id, new).await?;
    Ok((StatusCode::CREATED, Json(detail(&app, &sandbox)?)))
}

/// The sandbox as its owning project reads it now: with its envd access token.
fn detail(app: &App, sandbox: &Sandbox) -> Result<wire::Sandbox, SandboxError> {
    let token = e2b::envd_access_token(app, sandbox)?;
    Ok(wire::Sandbox::at(sandbox, edge::now()).with_access(token, e2b::e2b_domain()))
}

/// Records a sandbox on the most recently heard online node and has that node create it,
/// waiting for its answer, within the project's live-sandbox cap (see
/// [`sandboxes::launch_capped`]).
pub async fn launch(app: &App, launch: Launch) -> Result<Sandbox, SandboxError> {
    Ok(sandboxes::launch_capped(&app.store, launch, app.caps.sandboxes).await?)
}

/// Ends a sandbox from inside: recorded killed unless it has ended, and its node told.
pub async fn end(app: &App, sandbox: &Sandbox) {
    sandboxes::end(&app.store, sandbox).await
}

/// The project's sandboxes (at most 100), ended ones included.
#[utoipa::path(
    get,
    path = "/sandbox/v1/sandboxes",
    tag = "sandbox",
    operation_id = "sandbox-list",
    responses(
        (status = 200, description = "The sandboxes.", body = Vec<wire::Sandbox>),
        (status = 500, description = "An internal error.", body = E2bError),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: SandboxAuth,
) -> Result<Json<Vec<wire::Sandbox>>, SandboxError> {
    let limit = PageLimit::new(100).map_err(|_| SandboxError::Internal("page limit"))?;
    let found = app.store.sandboxes().list(&auth.0.project_id, limit).await?;
    let now = edge::now();
    Ok(Json(found.iter().map(|s| wire::Sandbox::at(s, now)).collect()))
}

/// One sandbox, as it reads now.
#[utoipa::path(
    get,
    path = "/sandbox/v1/sandboxes/{sandbox_id}",
    tag = "sandbox",
    operation_id = "sandbox-get",
    params(("sandbox_id" = String, Path, description = "The sandbox's `sandboxID`; an unknown or malformed id is a 404.")),
    responses(
        (status = 200, description = "The sandbox.", body = wire::Sandbox),
        (status = 404, description = "No such sandbox in the project.", body = E2bError),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: SandboxAuth,
    Path(id): Path<String>,
) -> Result<Json<wire::Sandbox>, SandboxError> {
    let sandbox = load(&app, &auth, &id).await?;
    Ok(Json(detail(&app, &sandbox)?))
}

/// Kill a sandbox and every process in it.
#[utoipa::path(
    delete,
    path = "/sandbox/v1/sandboxes/{sandbox_id}",
    tag = "sandbox",
    operation_id = "sandbox-kill",
    params(("sandbox_id" = String, Path, description = "The sandbox's `sandboxID`; an unknown or malformed id is a 404.")),
    responses(
        (status = 204, description = "Killed; the node removes it."),
        (status = 404, description = "No such sandbox, or it already ended.", body = E2bError),
        (status = 409, description = "A session's managed compute or an environment's workspace, or it kept changing concurrently.", body = E2bError),
        (status = 500, description = "An internal error.", body = E2bError),
    ),
)]
pub async fn kill(
    State(app): State<App>,
    auth: SandboxAuth,
    Path(id): Path<String>,
) -> Result<StatusCode, SandboxError> {
    let sandbox = load(&app, &auth, &id).await?;
    lifecycle_is_ours(&sandbox)?;
    sandboxes::kill(&app.store, sandbox).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Freeze a running sandbox; its deadline does not run down while paused.
#[utoipa::path(
    post,
    path = "/sandbox/v1/sandboxes/{sandbox_id}/pause",
    tag = "sandbox",
    operation_id = "sandbox-pause",
    params(("sandbox_id" = String, Path, description = "The sandbox's `sandboxID`; an unknown or malformed id is a 404.")),
    responses(
        (status = 204, description = "Frozen."),
        (status = 404, description = "No such sandbox in the project.", body = E2bError),
        (status = 409, description = "Not running (already paused, expired or killed), a session's managed compute or an environment's workspace, or changed concurrently.", body = E2bError),
        (status = 500, description = "An internal error.", body = E2bError),
        (status = 503, description = "The node did not answer in time or refused, or storage is unavailable.", body = E2bError),
    ),
)]
pub async fn pause(
    State(app): State<App>,
    auth: SandboxAuth,
    Path(id): Path<String>,
) -> Result<StatusCode, SandboxError> {
    let sandbox = load(&app, &auth, &id).await?;
    lifecycle_is_ours(&sandbox)?;
    sandboxes::pause(&app.store, &sandbox).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Thaw a paused sandbox, with the time it had left.
#[utoipa::path(
    post,
    path = "/sandbox/v1/sandboxes/{sandbox_id}/resume",
    tag = "sandbox",
    operation_id = "sandbox-resume",
    params(("sandbox_id" = String, Path, description = "The sandbox's `sandboxID`; an unknown or malformed id is a 404.")),
    responses(
        (status = 201, description = "It runs again.", body = wire::Sandbox),
        (status = 404, description = "No such sandbox in the project.", body = E2bError),
        (status = 409, description = "Not paused, a session's managed compute or an environment's workspace, or changed concurrently.", body = E2bError),
        (status = 500, description = "An internal error.", body = E2bError),
        (status = 503, description = "The node did not answer in time or refused, or storage is unavailable.", body = E2bError),
    ),
)]
pub async fn resume(
    State(app): State<App>,
    auth: SandboxAuth,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<wire::Sandbox>), SandboxError> {
    let sandbox = load(&app, &auth, &id).await?;
    lifecycle_is_ours(&sandbox)?;
    let resumed = sandboxes::resume(&app.store, &sandbox).await?;
    Ok((StatusCode::CREATED, Json(detail(&app, &resumed)?)))
}

/// Move a running sandbox's deadline to `timeout` seconds from now; never shortens it and never
/// resumes a paused sandbox.
#[utoipa::path(
    post,
    path = "/sandbox/v1/sandboxes/{sandbox_id}/timeout",
    tag = "sandbox",
    operation_id = "sandbox-timeout",
    params(("sandbox_id" = String, Path, description = "The sandbox's `sandboxID`; an unknown or malformed id is a 404.")),
    request_body = wire::NewTimeout,
    responses(
        (status = 204, description = "The deadline moved (or already was that late)."),
        (status = 400, description = "The body is not a valid request.", body = E2bError),
        (status = 404, description = "No such sandbox in the project.", body = E2bError),
        (status = 409, description = "Paused, expired or killed, it would shorten the deadline, a session's managed compute or an environment's workspace, or changed concurrently.", body = E2bError),
        (status = 500, description = "An internal error.", body = E2bError),
    ),
)]
pub async fn set_timeout(
    State(app): State<App>,
    auth: SandboxAuth,
    Path(id): Path<String>,
    Wire(body, _): Wire<wire::NewTimeout, SandboxError>,
) -> Result<StatusCode, SandboxError> {
    let sandbox = load(&app, &auth, &id).await?;
    lifecycle_is_ours(&sandbox)?;
    let timeout = TimeoutSeconds::try_from(body)?;
    sandboxes::extend(&app.store, &sandbox, timeout).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A Session's managed compute lives and ends with its Session, and an environment's workspace
/// sandbox with its environment (the platform's: it holds files a Run or a restore relies on):
/// the sandbox API may run processes in them but not change their lifecycle.
pub(super) fn lifecycle_is_ours(sandbox: &Sandbox) -> Result<(), SandboxError> {
    if let Some(session) = sandbox.session_id {
        return Err(SandboxError::ManagedCompute(session));
    }
    match sandbox.metadata.as_map().get(ENVIRONMENT_METADATA_KEY) {
        Some(environment) => Err(SandboxError::EnvironmentWorkspace(environment.clone())),
        None => Ok(()),
    }
}
