//! GET /core/v1/sandbox/nodes and GET /core/v1/sandbox/nodes/{node_id}?range=1h|6h|24h: what a
//! node last reported about its host, and its history in complete UTC buckets. Reads only: they
//! never touch a node or its sandboxes.

use agentplane_domain::Timestamp;
use agentplane_domain::ValidationError;
use agentplane_domain::ids::NodeId;
use agentplane_domain::query::Query;
use agentplane_domain::telemetry::node::{NodeRange, host_observation, node_history, node_history_start};
use axum::Json;
use axum::extract::{Path, RawQuery, State};

use super::auth::CoreAdmin;
use super::error::{CoreError, Found};
use super::wire::{NodeHistoryBody, NodeHostBody, NodeRangeParams, SandboxNodeBody, SandboxNodeDetailBody};
use crate::envelope::ErrorEnvelope;
use crate::list::List;
use crate::{App, edge};

/// Every registered node, newest first, in one page.
#[utoipa::path(
    get,
    path = "/core/v1/sandbox/nodes",
    tag = "core",
    operation_id = "core-sandbox-nodes-list",
    responses(
        (status = 200, description = "Every node (`has_more` is always false).", body = List<SandboxNodeBody>),
    ),
)]
pub async fn list(
    State(app): State<App>,
    _admin: CoreAdmin,
) -> Result<Json<List<SandboxNodeBody>>, CoreError> {
    let now = edge::now();
    let mut nodes = app.store.nodes().all().await?;
    nodes.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
    let data: Vec<SandboxNodeBody> = nodes.iter().map(|n| SandboxNodeBody::new(n, now)).collect();
    Ok(Json(List {
        object: "list",
        first_id: data.first().map(|n| n.id.clone()),
        last_id: data.last().map(|n| n.id.clone()),
        data,
        has_more: false,
    }))
}

/// One node with its last host observation and its history over `range`.
#[utoipa::path(
    get,
    path = "/core/v1/sandbox/nodes/{node_id}",
    tag = "core",
    operation_id = "core-sandbox-node-get",
    params(
        ("node_id" = String, Path, description = "The node; a malformed id answers 400 `invalid_request`."),
        NodeRangeParams,
    ),
    responses(
        (status = 200, description = "The node, its host and its history.", body = SandboxNodeDetailBody),
        (status = 400, description = "`invalid_request`: another parameter, a repeated or invalid `range`, or a malformed node id.", body = ErrorEnvelope),
        (status = 404, description = "No such node.", body = ErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<SandboxNodeDetailBody>, CoreError> {
    // The query is checked before the id, and both before any read.
    let range = NodeRange::from_query(&Query::parse(raw.as_deref())).map_err(CoreError::InvalidRequest)?;
    let id: NodeId = id
        .parse()
        .map_err(|_| CoreError::InvalidRequest(ValidationError::new("node_id", "malformed node id")))?;
    let node = app.store.nodes().get(&id).await.or_not_found(CoreError::NotFound("node"))?;
    let now = edge::now();
    // Only the range's complete buckets are read (the one in progress is left out anyway).
    let from = Timestamp::from_unix_seconds(node_history_start(range, now));
    let read = app.store.nodes().history(&id, from, now).await?;
    let last = node.host.as_ref().map(|h| h.telemetry());
    Ok(Json(SandboxNodeDetailBody {
        node: SandboxNodeBody::new(&node, now),
        host: NodeHostBody::from(&host_observation(last.as_ref())),
        history: NodeHistoryBody::from(&node_history(range, now, &read.observations)),
    }))
}
