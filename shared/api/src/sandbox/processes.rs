//! POST/GET /sandbox/v1/sandboxes/{id}/processes and GET …/processes/{processId}/output.
//! Reads show what was observed and nothing more; they never touch the node, so reading never
//! resumes a paused sandbox. While the sandbox's node is away (silent past the heartbeat
//! window) nobody watches its processes: running ones read `unknown` with `observationGap`, and
//! output the table no longer holds (past its retention) reads `truncated`.

use agentplane_domain::Timestamp;
use agentplane_domain::query::Query;
use agentplane_domain::sandbox::command::Command;
use agentplane_domain::sandbox::process::{StateFilter, newest_first};
use agentplane_domain::sandbox::{ProcessId, as_seen, request};
use agentplane_store::StoreError;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde_json::{Value, json};

use super::auth::SandboxAuth;
use super::error::SandboxError;
use super::sandboxes::{load, require_running};
use super::{dispatch, render};
use crate::body::JsonObject;
use crate::{App, edge};
use agentplane_domain::sandbox::Sandbox;

#[utoipa::path(
    post,
    path = "/sandbox/v1/sandboxes/{sandbox_id}/processes",
    tag = "sandbox",
    operation_id = "sandbox-process-start",
    params(("sandbox_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn start(
    State(app): State<App>,
    auth: SandboxAuth,
    Path(id): Path<String>,
    JsonObject(body, _): JsonObject<SandboxError>,
) -> Result<Json<Value>, SandboxError> {
    let sandbox = load(&app, &auth, &id).await?;
    let new = request::start_process(&body)?;
    require_running(&sandbox, edge::now())?;
    let number =
        app.store.sandboxes().next_process_number(&sandbox.id, edge::now()).await.map_err(|e| match e {
            StoreError::Conflict => SandboxError::NotRunning,
            other => other.into(),
        })?;
    let command =
        Command::StartProcess { sandbox_id: sandbox.id.clone(), number, config: new.config, tag: new.tag };
    match dispatch::run(&app, &sandbox.node_id, command).await? {
        agentplane_domain::sandbox::command::CommandOutcome::Done { pid, .. } => Ok(Json(json!({
            "processId": ProcessId::Observed(number).to_string(),
            "pid": pid,
        }))),
        agentplane_domain::sandbox::command::CommandOutcome::Failed { message } => {
            Err(SandboxError::ProcessNotStarted(message))
        }
    }
}

#[utoipa::path(
    get,
    path = "/sandbox/v1/sandboxes/{sandbox_id}/processes",
    tag = "sandbox",
    operation_id = "sandbox-process-list",
    params(("sandbox_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn list(
    State(app): State<App>,
    auth: SandboxAuth,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, SandboxError> {
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
    Ok(Json(json!({ "processes": records.iter().map(render::process).collect::<Vec<_>>() })))
}

/// Most chunks one read returns (a process retains at most 1024).
const MAX_CHUNKS_PER_READ: usize = 1024;

#[utoipa::path(
    get,
    path = "/sandbox/v1/sandboxes/{sandbox_id}/processes/{process_id}/output",
    tag = "sandbox",
    operation_id = "sandbox-process-output",
    params(("sandbox_id" = String, Path), ("process_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn output(
    State(app): State<App>,
    auth: SandboxAuth,
    Path((id, process)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, SandboxError> {
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
    Ok(Json(json!({
        "processId": process.to_string(),
        "state": record.state.as_str(),
        "chunks": chunks.iter().map(|c| json!({
            "stream": c.stream.as_str(),
            "data": c.data,
            "timestamp": c.at.unix_millis(),
        })).collect::<Vec<_>>(),
        "cursor": cursor.map(|c| c.to_string()),
        "hasMore": has_more,
        "truncated": record.output_truncated || lost,
        "observationGap": record.observation_gap,
    })))
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
