//! A fork: a new environment whose workspace starts as a checkpoint another environment of the
//! same project returned (its initial checkpoint, or a Run's `checkpoint.snapshotId`). The new
//! environment records that checkpoint as its own initial one and starts with no Runs (its first
//! Run is `environmentSequence` 1); its sandbox is started and restored before the create
//! answers, so its files read as the checkpoint's at once. A fork whose restore fails is
//! deleted again (the retention sweep purges it) and the create fails.

use agentplane_domain::ProjectId;
use agentplane_domain::platform::Environment;
use agentplane_domain::telemetry::EnvironmentId;

use agentplane_engine::platform::{WorkspaceError, checkpoint, workspace};

use super::error::PlatformError;
use super::platform;
use crate::{App, edge};

/// A snapshot id is the SHA-256 of its manifest: 64 lowercase hexadecimal digits.
fn snapshot_id(text: &str) -> Result<&str, PlatformError> {
    let hex = text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if hex {
        Ok(text)
    } else {
        Err(PlatformError::invalid("snapshotId", "`snapshotId` must be 64 lowercase hexadecimal digits"))
    }
}

/// Creates the environment `name` of `project` from the checkpoint `snapshot`.
pub async fn fork(
    app: &App,
    project: ProjectId,
    name: Option<String>,
    snapshot: &str,
) -> Result<Environment, PlatformError> {
    let snapshot = snapshot_id(snapshot)?;
    if app.store.environments().snapshot_source(&project, snapshot).await?.is_none() {
        return Err(PlatformError::SnapshotNotFound);
    }
    // Its manifest must still be there (a purge of its environment may have taken it).
    match checkpoint::load(&app.store, snapshot).await {
        Ok(_) => {}
        Err(WorkspaceError::Storage(agentplane_engine::ports::PortError::NotFound)) => {
            return Err(PlatformError::SnapshotNotFound);
        }
        Err(err) => return Err(err.into()),
    }
    let id = EnvironmentId::from_random(edge::random()?);
    let mut environment = Environment::new(id, project, name, edge::now());
    environment.initial_checkpoint = Some(snapshot.to_owned());
    app.store.environments().create(&environment).await?;
    let restored = async {
        let sandbox = workspace::sandbox(&platform(app), &environment).await?;
        checkpoint::restore(&app.store, &sandbox, snapshot).await
    }
    .await;
    if let Err(err) = restored {
        tracing::warn!(error = %err, environment = %id, "restoring a fork's checkpoint failed");
        if let Err(undo) = app.store.environments().mark_deleted(&project, &id, edge::now()).await {
            tracing::error!(error = %undo, environment = %id, "could not delete a fork that failed");
        }
        return Err(err.into());
    }
    Ok(environment)
}
