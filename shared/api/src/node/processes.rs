//! POST /node/v1/sandboxes/{sandbox_id}/processes: a node reserves the `obs-<n>` number of a
//! process it starts itself (envd), from the same conditional counter Core starts processes
//! with, so a number is never handed out twice whoever starts the process.

use agentplane_domain::sandbox::SandboxId;
use agentplane_store::StoreError;
use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;

use super::auth::NodeAuth;
use super::error::NodeError;
use super::wire::ReservedProcess;
use crate::envelope::ErrorEnvelope;
use crate::{App, edge};

#[utoipa::path(
    post,
    path = "/node/v1/sandboxes/{sandbox_id}/processes",
    tag = "node",
    operation_id = "node-process-reserve",
    params(("sandbox_id" = String, Path, description = "A sandbox this node hosts; another node's, unknown or malformed answers 404.")),
    responses(
        (status = 201, description = "The number is the node's to report the process's start, output and exit under (`obs-<number>`).", body = ReservedProcess),
        (status = 404, description = "This node hosts no such sandbox.", body = ErrorEnvelope),
        (status = 409, description = "The sandbox is not running (paused, expired or killed).", body = ErrorEnvelope),
    ),
)]
pub async fn reserve(
    State(app): State<App>,
    NodeAuth(node): NodeAuth,
    Path(sandbox): Path<String>,
) -> Result<(StatusCode, Json<ReservedProcess>), NodeError> {
    let id: SandboxId = sandbox.parse().map_err(|_| NodeError::NotFound("sandbox"))?;
    let sandboxes = app.store.sandboxes();
    let found = sandboxes.get_any(&id).await.map_err(NodeError::lookup("sandbox"))?;
    if found.node_id != node {
        return Err(NodeError::NotFound("sandbox"));
    }
    let number = sandboxes.next_process_number(&id, edge::now()).await.map_err(|err| match err {
        StoreError::Conflict => NodeError::SandboxNotRunning,
        other => other.into(),
    })?;
    Ok((StatusCode::CREATED, Json(ReservedProcess { number })))
}
