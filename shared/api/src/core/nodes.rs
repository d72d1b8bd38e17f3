//! POST /core/v1/sandbox/nodes: registers a sandbox node. The node token is shown once; only
//! its SHA-256 is stored.

use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::{Node, NodeTokenSecret};
use axum::Json;
use axum::extract::State;
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
    let name = match body.name {
        None => "node".to_owned(),
        Some(s) if !s.trim().is_empty() && s.chars().count() <= 128 => s,
        Some(_) => {
            return Err(agentplane_domain::ValidationError::new(
                "name",
                "`name` must be a string of 1 to 128 characters",
            )
            .into());
        }
    };
    let token = NodeTokenSecret::from_random(edge::random()?);
    let now = edge::now();
    let node = Node {
        id: NodeId::from_random(edge::random()?),
        name,
        created_at: now,
        connection_id: None,
        last_seen_at: None,
        host: None,
    };
    app.store.nodes().register(&node, &token.hash()).await?;
    // The only time the plaintext token leaves the server.
    let body = RegisteredSandboxNodeBody {
        node: SandboxNodeBody::new(&node, now),
        token: token.expose().to_owned(),
    };
    Ok((StatusCode::CREATED, Json(body)))
}
