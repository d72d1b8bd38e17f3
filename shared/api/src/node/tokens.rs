//! A node's token: rotated by the node itself (`POST /node/v1/token`), and handed out by
//! enrollment (`POST /node/v1/enroll`, authenticated with the deployment's enrollment key, for
//! hosts nobody gives a token by hand: an Auto Scaling group's instances).

use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::{Node, NodeTokenSecret};
use agentplane_store::StoreError;
use agentplane_store::dynamo::nodes::Enrollment;
use axum::Json;
use axum::extract::{FromRequestParts, State};
use http::StatusCode;
use http::request::Parts;

use super::auth::NodeToken;
use super::error::NodeError;
use super::wire::{EnrollNode, RotatedNodeTokenBody};
use crate::body::Wire;
use crate::core::auth::bearer;
use crate::core::wire::{RegisteredSandboxNodeBody, SandboxNodeBody};
use crate::envelope::ErrorEnvelope;
use crate::{App, edge};

/// How long a token rotated away is still accepted (`AGENTPLANE_NODE_TOKEN_GRACE_S`, default
/// 600): long enough for every request the node sent with it to finish (a long poll is at most
/// 20 s) and for a daemon that lost the answer to rotate again with it.
pub const DEFAULT_GRACE: std::time::Duration = std::time::Duration::from_secs(600);

/// POST /node/v1/token: a new token for the node; the one the request carried stays accepted
/// until the grace ends.
#[utoipa::path(
    post,
    path = "/node/v1/token",
    tag = "node",
    operation_id = "node-token-rotate",
    responses(
        (status = 200, description = "The new token; the one this request carried is accepted until `previous_token_expires_at`.", body = RotatedNodeTokenBody),
        (status = 401, description = "Missing, invalid or expired node token.", body = ErrorEnvelope),
        (status = 409, description = "`conflict`: the node's token was rotated concurrently; rotate again with the token you hold.", body = ErrorEnvelope),
    ),
)]
pub async fn rotate(
    State(app): State<App>,
    NodeToken(node, presented): NodeToken,
) -> Result<Json<RotatedNodeTokenBody>, NodeError> {
    let token = NodeTokenSecret::from_random(edge::random()?);
    let grace = i64::try_from(app.node_token_grace.as_secs()).unwrap_or(i64::MAX);
    let until = edge::now().plus_seconds(grace);
    app.store.nodes().rotate_token(&node, &presented, &token.hash(), until).await.map_err(
        |err| match err {
            StoreError::Conflict => NodeError::TokenConflict,
            StoreError::NotFound => NodeError::InvalidToken,
            other => other.into(),
        },
    )?;
    tracing::info!(node = %node, "node token rotated");
    Ok(Json(RotatedNodeTokenBody {
        node_id: node.to_string(),
        token: token.expose().to_owned(),
        previous_token_expires_at: until.unix_seconds(),
    }))
}

/// Proof that the request carried the deployment's node enrollment key.
pub struct Enroller;

impl FromRequestParts<App> for Enroller {
    type Rejection = NodeError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, NodeError> {
        let Some(keys) = app.node_enrollment.as_deref() else {
            return Err(NodeError::EnrollmentDisabled);
        };
        let presented = bearer(parts).ok_or(NodeError::InvalidEnrollmentKey)?;
        if keys.accept(presented, edge::now()).await {
            Ok(Enroller)
        } else {
            Err(NodeError::InvalidEnrollmentKey)
        }
    }
}

/// POST /node/v1/enroll: a node for `name` and its token. One node per name: a name enrolled
/// before gets its node back with a new token, every earlier token of it refused from now on
/// (a host that lost its state enrolls again; a replaced instance has a new name).
#[utoipa::path(
    post,
    path = "/node/v1/enroll",
    tag = "node",
    operation_id = "node-enroll",
    request_body = EnrollNode,
    security(("enrollment_key" = [])),
    responses(
        (status = 201, description = "A new node, with its token.", body = RegisteredSandboxNodeBody),
        (status = 200, description = "The name's node, with a new token; its earlier tokens are refused.", body = RegisteredSandboxNodeBody),
        (status = 400, description = "The body is not a valid request.", body = ErrorEnvelope),
        (status = 401, description = "`invalid_enrollment_key`: missing or wrong enrollment key.", body = ErrorEnvelope),
        (status = 404, description = "The deployment configured no enrollment key.", body = ErrorEnvelope),
    ),
)]
pub async fn enroll(
    State(app): State<App>,
    _enroller: Enroller,
    Wire(body, _): Wire<EnrollNode, NodeError>,
) -> Result<(StatusCode, Json<RegisteredSandboxNodeBody>), NodeError> {
    let node = Node::unseen(NodeId::from_random(edge::random()?), body.name, edge::now())?;
    let token = NodeTokenSecret::from_random(edge::random()?);
    let (status, node) = match app.store.nodes().enroll(&node, &token.hash()).await {
        Ok(Enrollment::Created(node)) => (StatusCode::CREATED, node),
        Ok(Enrollment::Reissued(node)) => (StatusCode::OK, node),
        // A concurrent enrollment of the same name: the node enrolls again.
        Err(StoreError::Conflict) => return Err(NodeError::TokenConflict),
        Err(err) => return Err(err.into()),
    };
    tracing::info!(node = %node.id, name = %node.name, created = status == StatusCode::CREATED, "node enrolled");
    let body = RegisteredSandboxNodeBody {
        node: SandboxNodeBody::new(&node, node.created_at),
        token: token.expose().to_owned(),
    };
    Ok((status, Json(body)))
}
