//! POST /core/v1/sandbox/nodes: registers a sandbox node. The node token is shown once; only
//! its SHA-256 is stored.

use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::{Node, NodeTokenSecret};
use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;

use super::auth::CoreAdmin;
use super::error::CoreError;
use super::wire::{RegisterSandboxNode, RegisteredSandboxNodeBody, SandboxNodeBody};
use crate::body::Wire;
use crate::envelope::ErrorEnvelope;
use crate::{App, edge};

/// Register a sandbox node. Its token is in this answer only.
#[utoipa::path(
    post,
    path = "/core/v1/sandbox/nodes",
    tag = "core",
    operation_id = "core-sandbox-nodes-register",
    request_body = RegisterSandboxNode,
    responses(
        (status = 201, description = "The new node, with its token.", body = RegisteredSandboxNodeBody),
        (status = 400, description = "The body is not a valid request.", body = ErrorEnvelope),
    ),
)]
pub async fn register(
    State(app): State<App>,
    _admin: CoreAdmin,
    Wire(body, _): Wire<RegisterSandboxNode, CoreError>,
) -> Result<(StatusCode, Json<RegisteredSandboxNodeBody>), CoreError> {
    let name = body.name.unwrap_or_else(|| "node".to_owned());
    let node = Node::unseen(NodeId::from_random(edge::random()?), name, edge::now())?;
    let token = NodeTokenSecret::from_random(edge::random()?);
    app.store.nodes().register(&node, &token.hash()).await?;
    // The only time the plaintext token leaves the server.
    let body = RegisteredSandboxNodeBody {
        node: SandboxNodeBody::new(&node, node.created_at),
        token: token.expose().to_owned(),
    };
    Ok((StatusCode::CREATED, Json(body)))
}

/// Reissue a node's token: every token it had is refused from now on (a leaked one), and the
/// new one is in this answer only. The node's daemon must be given it (or enroll again).
#[utoipa::path(
    post,
    path = "/core/v1/sandbox/nodes/{node_id}/token",
    tag = "core",
    operation_id = "core-sandbox-node-token-reissue",
    params(("node_id" = String, Path, description = "The node; a malformed id answers 400 `invalid_request`.")),
    responses(
        (status = 200, description = "The node, with its new token; every earlier token is refused.", body = RegisteredSandboxNodeBody),
        (status = 400, description = "`node_id` is malformed.", body = ErrorEnvelope),
        (status = 404, description = "No such node.", body = ErrorEnvelope),
        (status = 409, description = "`conflict`: the node rotated its token meanwhile; reissue again.", body = ErrorEnvelope),
    ),
)]
pub async fn reissue_token(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path(id): Path<String>,
) -> Result<Json<RegisteredSandboxNodeBody>, CoreError> {
    let id: NodeId = id.parse().map_err(|_| {
        CoreError::InvalidRequest(agentplane_domain::ValidationError::new("node_id", "malformed node id"))
    })?;
    let token = NodeTokenSecret::from_random(edge::random()?);
    app.store.nodes().reissue_token(&id, &token.hash()).await.map_err(|err| match err {
        agentplane_store::StoreError::NotFound => CoreError::NotFound("node"),
        agentplane_store::StoreError::Conflict => {
            CoreError::Conflict("the node rotated its token meanwhile; reissue again")
        }
        other => other.into(),
    })?;
    tracing::warn!(node = %id, "node token reissued by Core: every earlier token is refused");
    let node = app.store.nodes().get(&id).await?;
    let body = RegisteredSandboxNodeBody {
        node: SandboxNodeBody::new(&node, edge::now()),
        token: token.expose().to_owned(),
    };
    Ok(Json(body))
}
