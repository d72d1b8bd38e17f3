//! A fork: a new environment whose workspace starts as a checkpoint another environment of the
//! same project returned (its initial checkpoint, or a Run's `checkpoint.snapshotId`). The new
//! environment records that checkpoint as its own initial one and starts with no Runs (its first
//! Run is `environmentSequence` 1); its sandbox is started and restored before the fork answers,
//! so its files read as the checkpoint's at once. A fork whose restore fails is deleted again
//! (the retention sweep purges it) and the fork fails.

use agentplane_domain::ProjectId;
use agentplane_domain::platform::Environment;
use agentplane_domain::telemetry::EnvironmentId;

use super::{Platform, WorkspaceError, checkpoint, workspace};
use crate::ports::environments::EnvironmentForks;
use crate::ports::{Compute, PortError};

/// Why a fork was not made.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    /// No live environment or Run of the project returned the checkpoint (or its manifest is
    /// gone: a purge of its environment took it).
    #[error("snapshot not found")]
    SnapshotNotFound,
    #[error("randomness unavailable: {0}")]
    Randomness(getrandom::Error),
    /// The checkpoint could not be restored into the fork's workspace (the fork was deleted).
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error(transparent)]
    Port(#[from] PortError),
}

/// Creates the environment `name` of `project` from the checkpoint `snapshot` (a manifest's
/// SHA-256, as its hexadecimal digits).
pub async fn fork<S: EnvironmentForks, C: Compute>(
    platform: &Platform<'_, S, C>,
    project: ProjectId,
    name: Option<String>,
    snapshot: &str,
) -> Result<Environment, ForkError> {
    let store = platform.store;
    if store.snapshot_source(&project, snapshot).await?.is_none() {
        return Err(ForkError::SnapshotNotFound);
    }
    // Its manifest must still be there (a purge of its environment may have taken it).
    match checkpoint::load(store, snapshot).await {
        Ok(_) => {}
        Err(WorkspaceError::Storage(PortError::NotFound)) => return Err(ForkError::SnapshotNotFound),
        Err(err) => return Err(err.into()),
    }
    let id = EnvironmentId::from_random(crate::random::secret().map_err(ForkError::Randomness)?);
    let mut environment = Environment::new(id, project, name, crate::now());
    environment.initial_checkpoint = Some(snapshot.to_owned());
    // `Conflict`: the project's environment cap (the caller says so).
    store.create_environment(&environment, platform.max_environments).await?;
    let restored = async {
        let sandbox = workspace::sandbox(platform, &environment).await?;
        checkpoint::restore(store, &sandbox, snapshot).await
    }
    .await;
    if let Err(err) = restored {
        tracing::warn!(error = %err, environment = %id, "restoring a fork's checkpoint failed");
        if let Err(undo) = store.mark_environment_deleted(&project, &id, crate::now()).await {
            tracing::error!(error = %undo, environment = %id, "could not delete a fork that failed");
        }
        return Err(err.into());
    }
    Ok(environment)
}
