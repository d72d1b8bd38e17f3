//! `Authorization: Bearer apnode_…`: the node token's SHA-256 is looked up, like project keys.

use agentplane_domain::api_key::KeyHash;
use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::ids::looks_like_node_token;
use axum::extract::FromRequestParts;
use http::StatusCode;
use http::request::Parts;

use crate::App;
use crate::core::auth::bearer;
use crate::envelope::ApiError;

pub fn invalid_node_token() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "authentication_error",
        "invalid_node_token",
        "missing or invalid node token",
    )
}

/// The node a request comes from.
pub struct NodeAuth(pub NodeId);

impl FromRequestParts<App> for NodeAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, ApiError> {
        let token = bearer(parts).filter(|t| looks_like_node_token(t)).ok_or_else(invalid_node_token)?;
        match app.store.nodes().authenticate(&KeyHash::of(token)).await {
            Ok(Some(id)) => Ok(Self(id)),
            Ok(None) => Err(invalid_node_token()),
            Err(err) => Err(ApiError::storage(&err)),
        }
    }
}
