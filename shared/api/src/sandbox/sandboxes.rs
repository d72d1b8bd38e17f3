//! POST/GET /sandbox/v1/sandboxes, GET/DELETE …/{id}, POST …/{id}/pause, …/resume, …/timeout.

use agentplane_domain::ids::NodeId;
use agentplane_domain::page::PageLimit;
use agentplane_domain::sandbox::command::{Command, CommandOutcome};
use agentplane_domain::sandbox::request::CreateSandbox;
use agentplane_domain::sandbox::{
    ENVIRONMENT_METADATA_KEY, Lifecycle, LifecycleError, Sandbox, SandboxId, SandboxState, TimeoutSeconds,
};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use agentplane_store::StoreError;
use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;

use super::auth::SandboxAuth;
use super::error::E2bError;
use super::error::SandboxError;
use super::wire;
use crate::body::Wire;
use crate::{App, edge};
use agentplane_engine::dispatch;

/// A malformed id is indistinguishable from a missing sandbox.
pub fn sandbox_id(text: &str) -> Result<SandboxId, SandboxError> {
    text.parse().map_err(|_| SandboxError::SandboxNotFound)
}

pub async fn load(app: &App, auth: &SandboxAuth, id: &str) -> Result<Sandbox, SandboxError> {
    let id = sandbox_id(id)?;
    app.store.sandboxes().get(&auth.0.project_id, &id).await.map_err(SandboxError::sandbox_lookup)
}

/// The node that takes a new sandbox: the online node heard from most recently.
async fn pick_node(app: &App, now: Timestamp) -> Result<NodeId, SandboxError> {
    let nodes = app.store.nodes().all().await?;
    nodes
        .into_iter()
        .filter(|n| n.online(now))
        .max_by_key(|n| n.last_seen_at)
        .map(|n| n.id)
        .ok_or(SandboxError::NoNodeOnline)
}

fn failed(outcome: CommandOutcome) -> Result<std::collections::BTreeMap<String, String>, SandboxError> {
    match outcome {
        CommandOutcome::Done { details, .. } => Ok(details),
        CommandOutcome::Failed { message } => {
            tracing::warn!(%message, "node refused a command");
            Err(SandboxError::NodeRefused(message))
        }
    }
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
        (status = 500, description = "An internal error.", body = E2bError),
        (status = 503, description = "No node is online, the node did not answer in time or refused, or storage is unavailable.", body = E2bError),
    ),
)]
pub async fn create(
    State(app): State<App>,
    auth: SandboxAuth,
    Wire(body, _): Wire<wire::NewSandbox, SandboxError>,
) -> Result<(StatusCode, Json<wire::Sandbox>), SandboxError> {
    let new = CreateSandbox::try_from(body)?;
    let sandbox = launch(&app, Launch { project_id: auth.0.project_id, new, session_id: None }).await?;
    Ok((StatusCode::CREATED, Json(wire::Sandbox::at(&sandbox, edge::now()))))
}

/// What to start a sandbox for.
pub struct Launch {
    pub project_id: ProjectId,
    pub new: CreateSandbox,
    /// Set for a Session's managed compute.
    pub session_id: Option<SessionId>,
}

/// Records a sandbox on the most recently heard online node and has that node create it,
/// waiting for its answer. A sandbox the node could not make is recorded killed.
pub async fn launch(app: &App, launch: Launch) -> Result<Sandbox, SandboxError> {
    let now = edge::now();
    let node_id = pick_node(app, now).await?;
    let sandbox = Sandbox {
        id: SandboxId::from_random(edge::random().map_err(|_| SandboxError::Internal("randomness"))?),
        project_id: launch.project_id,
        node_id,
        started_at: now,
        lifecycle: Lifecycle::start(now, launch.new.timeout_s),
        metadata: launch.new.metadata,
        env_vars: launch.new.env_vars,
        isolation: Default::default(),
        session_id: launch.session_id,
    };
    app.store.sandboxes().create(&sandbox).await?;
    let command = Command::CreateSandbox {
        sandbox_id: sandbox.id.clone(),
        end_at: sandbox.lifecycle.end_at,
        env_vars: sandbox.env_vars.clone(),
    };
    let outcome =
        dispatch::run(&app.store, &node_id, command).await.map_err(SandboxError::from).and_then(failed);
    let isolation = match outcome {
        Ok(isolation) => isolation,
        Err(err) => {
            // Nothing usable was created: record it as killed so it never looks alive, and let
            // the node remove whatever it did make.
            end(app, &sandbox).await;
            return Err(err);
        }
    };
    app.store.sandboxes().set_isolation(&sandbox.id, &isolation).await?;
    Ok(app.store.sandboxes().get_any(&sandbox.id).await.unwrap_or(sandbox))
}

/// Records `sandbox` killed (unless it already ended) and has its node remove it. Best effort:
/// the node also ends what Core no longer lists as alive.
pub async fn end(app: &App, sandbox: &Sandbox) {
    if !sandbox.lifecycle.effective(edge::now()).is_final()
        && let Ok(killed) = sandbox.lifecycle.kill(edge::now())
    {
        let _ = app.store.sandboxes().transition(sandbox, &sandbox.lifecycle, &killed).await;
    }
    let _ = dispatch::enqueue(&app.store, &sandbox.node_id, Command::Kill { sandbox_id: sandbox.id.clone() })
        .await;
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
    Ok(Json(wire::Sandbox::at(&sandbox, edge::now())))
}

/// Applies a lifecycle rule as one conditional write; a concurrent change is a 409.
async fn change(
    app: &App,
    sandbox: &Sandbox,
    rule: impl FnOnce(&Lifecycle, Timestamp) -> Result<Lifecycle, LifecycleError>,
) -> Result<Sandbox, SandboxError> {
    let next = rule(&sandbox.lifecycle, edge::now())?;
    app.store
        .sandboxes()
        .transition(sandbox, &sandbox.lifecycle, &next)
        .await
        .map_err(SandboxError::sandbox_write)
}

/// How many lost races a delete re-reads after before it gives up with a 409.
const KILL_ATTEMPTS: u32 = 5;

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
    let mut sandbox = load(&app, &auth, &id).await?;
    lifecycle_is_ours(&sandbox)?;
    let mut lost = 0;
    loop {
        // An ended sandbox cannot be killed again: it is gone as far as E2B clients know.
        if sandbox.lifecycle.effective(edge::now()).is_final() {
            return Err(SandboxError::SandboxNotFound);
        }
        let killed = sandbox.lifecycle.kill(edge::now())?;
        match app.store.sandboxes().transition(&sandbox, &sandbox.lifecycle, &killed).await {
            Ok(_) => break,
            // It changed since it was read (killed by a concurrent delete, paused, extended):
            // read it again and answer as a delete made now would.
            Err(StoreError::Conflict) if lost < KILL_ATTEMPTS => {
                lost += 1;
                sandbox = load(&app, &auth, &id).await?;
            }
            Err(other) => return Err(SandboxError::sandbox_write(other)),
        }
    }
    // Recorded first; the node applies it when it gets it (the command stays queued).
    let _ = dispatch::enqueue(&app.store, &sandbox.node_id, Command::Kill { sandbox_id: sandbox.id.clone() })
        .await?;
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
    let next = sandbox.lifecycle.pause(edge::now())?;
    // Freeze first: a sandbox recorded paused must really be frozen.
    let outcome =
        dispatch::run(&app.store, &sandbox.node_id, Command::Pause { sandbox_id: sandbox.id.clone() })
            .await?;
    failed(outcome)?;
    let stored = app.store.sandboxes().transition(&sandbox, &sandbox.lifecycle, &next).await;
    if let Err(err) = stored {
        // Lost a race (killed, expired or paused meanwhile): undo the freeze where it still runs.
        let _ = dispatch::enqueue(
            &app.store,
            &sandbox.node_id,
            Command::Resume { sandbox_id: sandbox.id.clone(), end_at: sandbox.lifecycle.end_at },
        )
        .await;
        return Err(SandboxError::sandbox_write(err));
    }
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
    let resumed = change(&app, &sandbox, |l, now| l.resume(now)).await?;
    let command = Command::Resume { sandbox_id: resumed.id.clone(), end_at: resumed.lifecycle.end_at };
    if let Err(err) = dispatch::run(&app.store, &resumed.node_id, command)
        .await
        .map_err(SandboxError::from)
        .and_then(failed)
    {
        // Still frozen: record it as paused again, with the time it had left.
        if let Ok(paused) = resumed.lifecycle.pause(edge::now()) {
            let _ = app.store.sandboxes().transition(&resumed, &resumed.lifecycle, &paused).await;
        }
        return Err(err);
    }
    Ok((StatusCode::CREATED, Json(wire::Sandbox::at(&resumed, edge::now()))))
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
    let extended = change(&app, &sandbox, |l, now| l.extend(timeout, now)).await?;
    // The node re-reads Core's deadline before it enforces one, so this only speeds it up.
    let command = Command::SetDeadline { sandbox_id: extended.id.clone(), end_at: extended.lifecycle.end_at };
    let _ = dispatch::enqueue(&app.store, &extended.node_id, command).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A Session's managed compute lives and ends with its Session, and an environment's workspace
/// sandbox with its environment (the platform's: it holds files a Run or a restore relies on):
/// the sandbox API may run processes in them but not change their lifecycle.
fn lifecycle_is_ours(sandbox: &Sandbox) -> Result<(), SandboxError> {
    if let Some(session) = sandbox.session_id {
        return Err(SandboxError::ManagedCompute(session));
    }
    match sandbox.metadata.as_map().get(ENVIRONMENT_METADATA_KEY) {
        Some(environment) => Err(SandboxError::EnvironmentWorkspace(environment.clone())),
        None => Ok(()),
    }
}

/// Whether processes may start: only in a running sandbox.
pub fn require_running(sandbox: &Sandbox, now: Timestamp) -> Result<(), SandboxError> {
    match sandbox.lifecycle.effective(now) {
        SandboxState::Running => Ok(()),
        stopped => Err(SandboxError::Stopped(stopped)),
    }
}
