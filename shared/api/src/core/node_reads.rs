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
use serde_json::{Value, json};

use super::auth::CoreAdmin;
use super::error::{CoreError, Found};
use super::nodes::render;
use crate::{App, edge};

#[utoipa::path(
    get,
    path = "/core/v1/sandbox/nodes",
    tag = "core",
    operation_id = "core-sandbox-nodes-list",
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn list(State(app): State<App>, _admin: CoreAdmin) -> Result<Json<Value>, CoreError> {
    let now = edge::now();
    let mut nodes = app.store.nodes().all().await?;
    nodes.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
    Ok(Json(json!({
        "object": "list",
        "data": nodes.iter().map(|n| render(n, now)).collect::<Vec<_>>(),
        "has_more": false,
    })))
}

#[utoipa::path(
    get,
    path = "/core/v1/sandbox/nodes/{node_id}",
    tag = "core",
    operation_id = "core-sandbox-node-get",
    params(("node_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn get(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, CoreError> {
    // The query is checked before the id, and both before any read.
    let range = NodeRange::from_query(&Query::parse(raw.as_deref())).map_err(CoreError::InvalidRequest)?;
    let id: NodeId = id
        .parse()
        .map_err(|_| CoreError::InvalidRequest(ValidationError::new("node_id", "malformed node id")))?;
    let node = app.store.nodes().get(&id).await.or_not_found("node")?;
    let now = edge::now();
    // Only the range's complete buckets are read (the one in progress is left out anyway).
    let from = Timestamp::from_unix_seconds(node_history_start(range, now));
    let read = app.store.nodes().history(&id, from, now).await?;
    let observations = read.observations;
    let last = node.host.as_ref().map(|h| h.telemetry());
    let mut body = render(&node, now);
    body["host"] =
        serde_json::to_value(host_observation(last.as_ref())).map_err(|_| CoreError::internal("host"))?;
    body["history"] = serde_json::to_value(node_history(range, now, &observations))
        .map_err(|_| CoreError::internal("history"))?;
    Ok(Json(body))
}
