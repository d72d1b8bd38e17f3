//! POST /core/v1/sandbox/nodes: registers a sandbox node. The node token is shown once; only
//! its SHA-256 is stored.

use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::{Node, NodeTokenSecret};
use axum::Json;
use axum::extract::State;
use http::StatusCode;
use serde_json::{Value, json};

use super::auth::CoreAdmin;
use super::error::CoreError;
use crate::body::JsonObject;
use crate::{App, edge};

pub fn render(node: &Node, now: agentplane_domain::Timestamp) -> Value {
    json!({
        "id": node.id,
        "object": "sandbox_node",
        "name": node.name,
        "created_at": node.created_at.unix_seconds(),
        "online": node.online(now),
        "connection_id": node.connection_id,
    })
}

#[utoipa::path(
    post,
    path = "/core/v1/sandbox/nodes",
    tag = "core",
    operation_id = "core-sandbox-nodes-register",
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn register(
    State(app): State<App>,
    _admin: CoreAdmin,
    JsonObject(body, _): JsonObject<CoreError>,
) -> Result<(StatusCode, Json<Value>), CoreError> {
    let name = match body.get("name") {
        None | Some(Value::Null) => "node".to_owned(),
        Some(Value::String(s)) if !s.trim().is_empty() && s.chars().count() <= 128 => s.clone(),
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
    let mut out = render(&node, now);
    // The only time the plaintext token leaves the server.
    out["token"] = json!(token.expose());
    Ok((StatusCode::CREATED, Json(out)))
}
