//! POST/GET /sandbox/v1/sandboxes/{id}/processes and GET …/processes/{processId}/output.
//! Reads show what was observed and nothing more; they never touch the node, so reading never
//! resumes a paused sandbox. While the sandbox's node is away (silent past the heartbeat
//! window) nobody watches its processes: running ones read `unknown` with `observationGap`, and
//! output the table no longer holds (past its retention) reads `truncated`.

use agentplane_domain::Timestamp;
use agentplane_domain::query::Query;
use agentplane_domain::sandbox::command::{Command, CommandOutcome};
use agentplane_domain::sandbox::process::{StateFilter, newest_first};
use agentplane_domain::sandbox::{ProcessId, as_seen, request};
use agentplane_store::StoreError;
use axum::Json;
use axum::extract::{Path, RawQuery, State};

use super::auth::SandboxAuth;
use super::error::{E2bError, SandboxError};
use super::sandboxes::{load, require_running};
use super::wire;
use crate::body::Wire;
use crate::{App, edge};
use agentplane_domain::sandbox::Sandbox;
use agentplane_engine::dispatch;

/// Start a process in a running sandbox, and wait until it runs.
#[utoipa::path(
    post,
    path = "/sandbox/v1/sandboxes/{sandbox_id}/processes",
    tag = "sandbox",
    operation_id = "sandbox-process-start",
    params(("sandbox_id" = String, Path, description = "The sandbox's `sandboxID`; an unknown or malformed id is a 404.")),
    request_body = wire::StartProcess,
    responses(
        (status = 200, description = "The process runs.", body = wire::ProcessStarted),
        (status = 400, description = "The body is not a valid request.", body = E2bError),
        (status = 404, description = "No such sandbox in the project.", body = E2bError),
        (status = 409, description = "The sandbox is paused, expired or killed.", body = E2bError),
        (status = 500, description = "An internal error.", body = E2bError),
        (status = 503, description = "The node did not answer in time or could not start it, or storage is unavailable.", body = E2bError),
    ),
)]
pub async fn start(
    State(app): State<App>,
    auth: SandboxAuth,
    Path(id): Path<String>,
    Wire(body, _): Wire<wire::StartProcess, SandboxError>,
) -> Result<Json<wire::ProcessStarted>, SandboxError> {
    let sandbox = load(&app, &auth, &id).await?;
    let new = request::StartProcess::try_from(body)?;
    require_running(&sandbox, edge::now())?;
    let number =
        app.store.sandboxes().next_process_number(&sandbox.id, edge::now()).await.map_err(|e| match e {
            StoreError::Conflict => SandboxError::NotRunning,
            other => other.into(),
        })?;
    let command =
        Command::StartProcess { sandbox_id: sandbox.id.clone(), number, config: new.config, tag: new.tag };
    match dispatch::run(&app.store, &sandbox.node_id, command).await? {
        CommandOutcome::Done { pid, .. } => {
            Ok(Json(wire::ProcessStarted { process_id: ProcessId::Observed(number).to_string(), pid }))
        }
        CommandOutcome::Failed { message } => Err(SandboxError::ProcessNotStarted(message)),
    }
}

/// Live processes and retained observations, newest first. Never touches the node.
#[utoipa::path(
    get,
    path = "/sandbox/v1/sandboxes/{sandbox_id}/processes",
    tag = "sandbox",
    operation_id = "sandbox-process-list",
    params(("sandbox_id" = String, Path, description = "The sandbox's `sandboxID`; an unknown or malformed id is a 404."), wire::ProcessListParams),
    responses(
        (status = 200, description = "The processes.", body = wire::ProcessList),
        (status = 400, description = "An unknown, repeated or invalid query parameter.", body = E2bError),
        (status = 404, description = "No such sandbox in the project.", body = E2bError),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: SandboxAuth,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<wire::ProcessList>, SandboxError> {
    let query = Query::parse(raw.as_deref());
    if let Some(other) = query.names().find(|n| *n != "state") {
        return Err(SandboxError::UnknownQueryParameter(other.to_owned()));
    }
    let filter = StateFilter::parse(query.single("state")?).ok_or(SandboxError::InvalidStateFilter)?;
    let sandbox = load(&app, &auth, &id).await?;
    let now = edge::now();
    let state = sandbox.lifecycle.effective(now);
    let online = node_online(&app, &sandbox, now).await?;
    let mut records: Vec<_> = app
        .store
        .observations()
        .processes(&sandbox.id)
        .await?
        .into_iter()
        .map(|r| as_seen(r, state, online))
        .filter(|r| filter.admits(r.state))
        .collect();
    newest_first(&mut records);
    Ok(Json(wire::ProcessList { processes: records.iter().map(wire::Process::from).collect() }))
}

/// Most chunks one read returns (a process retains at most 1024).
const MAX_CHUNKS_PER_READ: usize = 1024;

/// A process's retained stdout and stderr, oldest first, from `cursor` on. Never touches the
/// node.
#[utoipa::path(
    get,
    path = "/sandbox/v1/sandboxes/{sandbox_id}/processes/{process_id}/output",
    tag = "sandbox",
    operation_id = "sandbox-process-output",
    params(("sandbox_id" = String, Path, description = "The sandbox's `sandboxID`; an unknown or malformed id is a 404."), ("process_id" = String, Path, description = "A `processId` from the process list (`obs-<n>` or `live-<pid>`); an unknown or malformed id is a 404."), wire::OutputParams),
    responses(
        (status = 200, description = "A page of output.", body = wire::ProcessOutput),
        (status = 400, description = "An unknown, repeated or invalid query parameter.", body = E2bError),
        (status = 404, description = "No such sandbox in the project, or no such process in it.", body = E2bError),
    ),
)]
pub async fn output(
    State(app): State<App>,
    auth: SandboxAuth,
    Path((id, process)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Json<wire::ProcessOutput>, SandboxError> {
    let query = Query::parse(raw.as_deref());
    if let Some(other) = query.names().find(|n| !matches!(*n, "cursor" | "limit")) {
        return Err(SandboxError::UnknownQueryParameter(other.to_owned()));
    }
    let after = match query.single("cursor")? {
        None => None,
        Some(text) => Some(
            text.parse::<u64>()
                .ok()
                .filter(|_| !text.starts_with('+') && (text == "0" || !text.starts_with('0')))
                .ok_or(SandboxError::InvalidCursor)?,
        ),
    };
    let limit = match query.single("limit")? {
        None => MAX_CHUNKS_PER_READ,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_CHUNKS_PER_READ).contains(n))
            .ok_or(SandboxError::InvalidLimit)?,
    };
    let sandbox = load(&app, &auth, &id).await?;
    let process: ProcessId = process.parse().map_err(|_| SandboxError::ProcessNotFound)?;
    let record =
        app.store.observations().process(&sandbox.id, process).await.map_err(SandboxError::process_lookup)?;
    let now = edge::now();
    let online = node_online(&app, &sandbox, now).await?;
    let record = as_seen(record, sandbox.lifecycle.effective(now), online);
    let observations = app.store.observations();
    let page = observations.output(&sandbox.id, process, after, limit, now).await?;
    // Chunks the retention index still lists but the table no longer holds outlived their
    // retention: that output is lost, and the read says so.
    let (retained, _) = observations.load_index(&sandbox.id).await?;
    let seqs: Vec<u64> = page.chunks.iter().map(|c| c.seq).collect();
    let lost = page.expired || retained.index.output_lost(process, after, &seqs, !page.has_more);
    let (chunks, has_more) = (page.chunks, page.has_more);
    let cursor = chunks.last().map(|c| c.seq).or(after);
    Ok(Json(wire::ProcessOutput {
        process_id: process.to_string(),
        state: record.state.into(),
        chunks: chunks
            .into_iter()
            .map(|c| wire::OutputChunk {
                stream: c.stream.into(),
                data: c.data,
                timestamp: c.at.unix_millis(),
            })
            .collect(),
        cursor: cursor.map(|c| c.to_string()),
        has_more,
        truncated: record.output_truncated || lost,
        observation_gap: record.observation_gap,
    }))
}

/// Whether the sandbox's node has been heard from within the heartbeat window. A node that no
/// longer exists watches nothing.
async fn node_online(app: &App, sandbox: &Sandbox, now: Timestamp) -> Result<bool, SandboxError> {
    match app.store.nodes().get(&sandbox.node_id).await {
        Ok(node) => Ok(node.online(now)),
        Err(StoreError::NotFound) => Ok(false),
        Err(other) => Err(other.into()),
    }
}
