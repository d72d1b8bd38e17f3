//! `Authorization: Bearer apnode_…`: the node token's SHA-256 is looked up, like project keys.

use agentplane_domain::api_key::KeyHash;
use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::ids::looks_like_node_token;
use axum::extract::FromRequestParts;
use http::request::Parts;

use super::error::NodeError;
use crate::App;
use crate::core::auth::bearer;

/// The node a request comes from.
pub struct NodeAuth(pub NodeId);

impl FromRequestParts<App> for NodeAuth {
    type Rejection = NodeError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, NodeError> {
        let token = bearer(parts).filter(|t| looks_like_node_token(t)).ok_or(NodeError::InvalidToken)?;
        let id = app.store.nodes().authenticate(&KeyHash::of(token)).await?;
        id.map(Self).ok_or(NodeError::InvalidToken)
    }
}
