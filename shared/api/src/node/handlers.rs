//! The node API (`/node/v1`), spoken only by node daemons: long-poll for commands, answer them,
//! report observations, heartbeat, and read back the sandboxes the node hosts.

use std::time::Duration;

use agentplane_domain::ids::CommandId;
use agentplane_domain::query::Query;
use agentplane_domain::sandbox::command::{CommandOutcome, Report};
use agentplane_domain::sandbox::host::Heartbeat;
use agentplane_store::StoreError;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;

use super::auth::NodeAuth;
use super::error::NodeError;
use super::report;
use super::wire::{
    CommandEnvelopeBody, CommandsBody, CompleteCommand, HeartbeatRequest, NodeSandboxBody, NodeSandboxesBody,
    PollParams, ReportRequest,
};
use crate::body::Wire;
use crate::envelope::ErrorEnvelope;
use crate::{App, edge};

/// Longest long poll (the Lambda timeout is 29 s).
const MAX_WAIT_S: u64 = 20;

/// GET /node/v1/commands?connection=…&wait=…: pending commands, waiting up to `wait` seconds
/// for one to arrive.
#[utoipa::path(
    get,
    path = "/node/v1/commands",
    tag = "node",
    operation_id = "node-commands-poll",
    params(PollParams),
    responses(
        (status = 200, description = "The commands claimed for this connection; empty when none came within `wait`.", body = CommandsBody),
        (status = 400, description = "`connection` is missing or invalid, `wait` is invalid, or either is repeated.", body = ErrorEnvelope),
    ),
)]
pub async fn poll(
    State(app): State<App>,
    NodeAuth(node): NodeAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<CommandsBody>, NodeError> {
    let query = Query::parse(raw.as_deref());
    let connection = query
        .single("connection")?
        .filter(|c| !c.is_empty() && c.len() <= 64)
        .ok_or(NodeError::ConnectionRequired)?
        .to_owned();
    let wait = match query.single("wait")? {
        None => MAX_WAIT_S,
        Some(text) => text.parse::<u64>().ok().filter(|w| *w <= MAX_WAIT_S).ok_or(NodeError::InvalidWait)?,
    };
    let commands =
        agentplane_engine::nodes::poll_commands(&app.store, &node, &connection, Duration::from_secs(wait))
            .await?;
    let commands = commands.iter().map(CommandEnvelopeBody::from).collect();
    Ok(Json(CommandsBody { commands }))
}

/// POST /node/v1/commands/{command_id}: the command's outcome.
#[utoipa::path(
    post,
    path = "/node/v1/commands/{command_id}",
    tag = "node",
    operation_id = "node-commands-complete",
    params(("command_id" = String, Path, description = "A command this node claimed; another node's, unknown or malformed answers 404.")),
    request_body = CompleteCommand,
    responses(
        (status = 204, description = "The outcome is recorded."),
        (status = 400, description = "The body is not a valid request (a wrong-typed field is named in `param`).", body = ErrorEnvelope),
        (status = 404, description = "No such command for this node.", body = ErrorEnvelope),
    ),
)]
pub async fn complete(
    State(app): State<App>,
    NodeAuth(node): NodeAuth,
    Path(command): Path<String>,
    Wire(body, _): Wire<CompleteCommand, NodeError>,
) -> Result<StatusCode, NodeError> {
    let command: CommandId = command.parse().map_err(|_| NodeError::NotFound("command"))?;
    let outcome = CommandOutcome::from(body);
    app.store
        .nodes()
        .complete(&node, &command, &outcome, edge::now())
        .await
        .map_err(NodeError::lookup("command"))?;
    Ok(StatusCode::NO_CONTENT)
}

/// POST /node/v1/heartbeat: the host observation, and the counters of the node's managed
/// sandboxes.
#[utoipa::path(
    post,
    path = "/node/v1/heartbeat",
    tag = "node",
    operation_id = "node-heartbeat",
    request_body = HeartbeatRequest,
    responses(
        (status = 204, description = "The heartbeat is recorded."),
        (status = 400, description = "The body is not a valid heartbeat, or `connection_id` is not 1 to 64 characters.", body = ErrorEnvelope),
        (status = 404, description = "The node is no longer registered.", body = ErrorEnvelope),
    ),
)]
pub async fn heartbeat(
    State(app): State<App>,
    NodeAuth(node): NodeAuth,
    Wire(body, _): Wire<HeartbeatRequest, NodeError>,
) -> Result<StatusCode, NodeError> {
    let heartbeat = Heartbeat::from(body);
    if heartbeat.connection_id.is_empty() || heartbeat.connection_id.len() > 64 {
        return Err(NodeError::InvalidConnectionId);
    }
    agentplane_engine::nodes::heartbeat(&app.store, &node, heartbeat).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// POST /node/v1/reports: observation events, applied once each.
#[utoipa::path(
    post,
    path = "/node/v1/reports",
    tag = "node",
    operation_id = "node-reports",
    request_body = ReportRequest,
    responses(
        (status = 204, description = "Every event is applied (each once)."),
        (status = 400, description = "The body is not a valid request (a wrong-typed field is named in `param`).", body = ErrorEnvelope),
        (status = 404, description = "An event names a sandbox this node does not host.", body = ErrorEnvelope),
        (status = 409, description = "`conflict`: the sandbox's observations changed concurrently; send the report again.", body = ErrorEnvelope),
    ),
)]
pub async fn reports(
    State(app): State<App>,
    NodeAuth(node): NodeAuth,
    Wire(body, _): Wire<ReportRequest, NodeError>,
) -> Result<StatusCode, NodeError> {
    let report = Report::from(body);
    let started = std::time::Instant::now();
    let events = report.events.len();
    let applied = report::apply(&app, &node, report, edge::now()).await;
    tracing::debug!(events, elapsed_ms = started.elapsed().as_millis() as u64, "report applied");
    match applied {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(StoreError::Conflict) => Err(NodeError::ReportConflict),
        Err(err) => Err(NodeError::lookup("sandbox")(err)),
    }
}

/// GET /node/v1/sandboxes: the sandboxes this node hosts, as Core knows them.
#[utoipa::path(
    get,
    path = "/node/v1/sandboxes",
    tag = "node",
    operation_id = "node-sandboxes-list",
    responses(
        (status = 200, description = "The sandboxes this node hosts.", body = NodeSandboxesBody),
    ),
)]
pub async fn sandboxes(
    State(app): State<App>,
    NodeAuth(node): NodeAuth,
) -> Result<Json<NodeSandboxesBody>, NodeError> {
    let hosted = app.store.sandboxes().hosted_by(&node).await?;
    let now = edge::now();
    let sandboxes = hosted.iter().map(|s| NodeSandboxBody::new(s, now)).collect();
    Ok(Json(NodeSandboxesBody { sandboxes }))
}
