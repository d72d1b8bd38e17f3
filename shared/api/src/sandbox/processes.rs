//! POST/GET /sandbox/v1/sandboxes/{id}/processes and GET …/processes/{processId}/output.
//! Reads show what was observed and nothing more; they never touch the node, so reading never
//! resumes a paused sandbox. While the sandbox's node is away (silent past the heartbeat
//! window) nobody watches its processes: running ones read `unknown` with `observationGap`, and
//! output the table no longer holds (past its retention) reads `truncated`.

use agentplane_domain::query::Query;
use agentplane_domain::sandbox::process::StateFilter;
use agentplane_domain::sandbox::{ProcessId, request};
use agentplane_engine::processes;
use axum::Json;
use axum::extract::{Path, RawQuery, State};

use super::auth::SandboxAuth;
use super::error::{E2bError, SandboxError};
use super::sandboxes::load;
use super::wire;
use crate::App;
use crate::body::Wire;

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
    let started = processes::start(&app.store, &sandbox, new).await?;
    Ok(Json(wire::ProcessStarted { process_id: started.process_id.to_string(), pid: started.pid }))
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
    let records = processes::list(&app.store, &sandbox, filter).await?;
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
    let read = processes::output(&app.store, &sandbox, process, after, limit).await?;
    Ok(Json(wire::ProcessOutput {
        process_id: process.to_string(),
        state: read.state.into(),
        chunks: read
            .chunks
            .into_iter()
            .map(|c| wire::OutputChunk {
                stream: c.stream.into(),
                data: c.data,
                timestamp: c.at.unix_millis(),
            })
            .collect(),
        cursor: read.cursor.map(|c| c.to_string()),
        has_more: read.has_more,
        truncated: read.truncated,
        observation_gap: read.observation_gap,
    }))
}
