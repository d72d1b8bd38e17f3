//! `Authorization: Bearer apnode_…`: the node token's SHA-256 is looked up, like project keys;
//! a token rotated away is accepted until its grace ends (`expires_at` on its lookup item).

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

/// The node a request comes from, and the hash of the token it presented (what a rotation
/// replaces).
pub struct NodeToken(pub NodeId, pub KeyHash);

impl FromRequestParts<App> for NodeToken {
    type Rejection = NodeError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, NodeError> {
        let token = bearer(parts).filter(|t| looks_like_node_token(t)).ok_or(NodeError::InvalidToken)?;
        let hash = KeyHash::of(token);
        let id = app.store.nodes().authenticate(&hash, crate::edge::now()).await?;
        id.map(|id| Self(id, hash)).ok_or(NodeError::InvalidToken)
    }
}

impl FromRequestParts<App> for NodeAuth {
    type Rejection = NodeError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, NodeError> {
        NodeToken::from_request_parts(parts, app).await.map(|NodeToken(id, _)| Self(id))
    }
}
