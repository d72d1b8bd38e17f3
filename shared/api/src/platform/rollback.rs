//! `DELETE /v1/environments/{e}/sessions/{s}/runs/{r}`: a rollback of a Run and every later Run
//! of its environment. Accepting it and the restore are the engine's
//! ([`agentplane_engine::platform::rollback`]); this route finds the Run in the caller's scope
//! and answers.

use agentplane_engine::platform::rollback::{self, Refused};
use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;

use super::auth::PlatformAuth;
use super::error::{PlatformError, PlatformErrorEnvelope};
use super::runs::{RunState, state};
use super::wire::Data;
use crate::App;

impl From<Refused> for PlatformError {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::EnvironmentNotFound => Self::EnvironmentNotFound,
            Refused::InProgress => Self::RollbackInProgress,
            Refused::CheckpointUnavailable { run_id, status } => {
                Self::CheckpointUnavailable { run_id, status }
            }
            Refused::Conflict => Self::ConcurrentUpdate,
            Refused::Storage(err) => err.into(),
        }
    }
}

/// Roll back a Run and every later Run in its Environment.
#[utoipa::path(
    delete,
    path = "/v1/environments/{environmentId}/sessions/{sessionId}/runs/{runId}",
    tag = "platform",
    operation_id = "platform-runs-rollback",
    params(
        ("environmentId" = String, Path, min_length = 1, description = "Environment identifier."),
        ("sessionId" = String, Path, min_length = 1, description = "Existing Session identifier within the named Environment."),
        ("runId" = String, Path, min_length = 1, description = "Run identifier within the named Environment and Session."),
    ),
    responses(
        (status = 202, description = "Accepted: the Run is `reverting` (or already reverted: nothing changes).", body = Data<RunState>),
        (status = 400, description = "Invalid request.", body = PlatformErrorEnvelope),
        (status = 404, description = "Resource not found or outside token scope.", body = PlatformErrorEnvelope),
        (status = 409, description = "Another rollback of the environment is under way (`rollback_in_progress`), or an earlier Run still runs, so the state before the Run is not known yet (`checkpoint_unavailable`; pending or failed checkpoints are skipped for the nearest earlier ready one).", body = PlatformErrorEnvelope),
    ),
)]
pub async fn rollback(
    State(app): State<App>,
    auth: PlatformAuth,
    Path((environment, session, id)): Path<(String, String, String)>,
) -> Result<(StatusCode, Json<Data<RunState>>), PlatformError> {
    let run = super::runs::load(&app, &auth, &environment, &session, &id).await?;
    let run = rollback::accept(&app.store, run).await?;
    Ok((StatusCode::ACCEPTED, Data::of(state(&run))))
}
