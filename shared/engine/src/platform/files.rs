//! An environment's workspace files, as the Platform API writes, reads, lists and deletes them
//! by a workspace path: each waits for a rollback under way (up to a bound), then runs on the
//! workspace's sandbox (started when the environment has none), whose node does the file
//! operation and refuses symlinks and non-regular files.

use std::time::Duration;

use agentplane_domain::platform::Environment;
use agentplane_domain::platform::manifest::ScanEntry;
use agentplane_domain::platform::path::WorkspacePath;
use agentplane_domain::sandbox::Sandbox;
use agentplane_domain::sandbox::command::Command;
use base64::Engine;

use super::{Platform, WorkspaceError, rollback, workspace};
use crate::ports::Compute;
use crate::ports::platform::PlatformStore;

/// Why a file operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// A rollback of the environment was still under way after the wait.
    #[error("a rollback of the environment is under way")]
    RollbackInProgress,
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
}

/// The workspace's regular files (`.git` and protected state left out, symlinks not followed),
/// by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub entries: Vec<ScanEntry>,
    /// The node listed its first 1,000 and there were more.
    pub has_more: bool,
}

/// The environment's workspace sandbox, once no rollback holds the environment (waited for up
/// to `wait`).
async fn sandbox<S: PlatformStore, C: Compute>(
    platform: &Platform<'_, S, C>,
    wait: Duration,
    environment: Environment,
) -> Result<Sandbox, FilesError> {
    let environment = rollback::after_rollback(platform.store, environment, wait)
        .await
        .map_err(WorkspaceError::Storage)?
        .ok_or(FilesError::RollbackInProgress)?;
    Ok(workspace::sandbox(platform, &environment).await?)
}

/// Writes `bytes` to the file at `path` (replacing it).
pub async fn write<S: PlatformStore, C: Compute>(
    platform: &Platform<'_, S, C>,
    wait: Duration,
    environment: Environment,
    path: &WorkspacePath,
    bytes: &[u8],
) -> Result<(), FilesError> {
    let sandbox = sandbox(platform, wait, environment).await?;
    let content = base64::engine::general_purpose::STANDARD.encode(bytes);
    let command = Command::WorkspaceWrite { sandbox_id: sandbox.id.clone(), path: path.relative(), content };
    workspace::run(platform.store, &sandbox, command).await?;
    Ok(())
}

/// The bytes of the file at `path`.
pub async fn read<S: PlatformStore, C: Compute>(
    platform: &Platform<'_, S, C>,
    wait: Duration,
    environment: Environment,
    path: &WorkspacePath,
) -> Result<Vec<u8>, FilesError> {
    let sandbox = sandbox(platform, wait, environment).await?;
    let command = Command::WorkspaceRead { sandbox_id: sandbox.id.clone(), path: path.relative() };
    let details = workspace::run(platform.store, &sandbox, command).await?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(details.get("content").map_or("", String::as_str))
        .map_err(|e| WorkspaceError::internal(format!("the node's file content: {e}")))?;
    Ok(bytes)
}

/// The workspace's regular files.
pub async fn list<S: PlatformStore, C: Compute>(
    platform: &Platform<'_, S, C>,
    wait: Duration,
    environment: Environment,
) -> Result<Listing, FilesError> {
    let sandbox = sandbox(platform, wait, environment).await?;
    let command = Command::WorkspaceList { sandbox_id: sandbox.id.clone(), path: String::new() };
    let details = workspace::run(platform.store, &sandbox, command).await?;
    let entries: Vec<ScanEntry> =
        serde_json::from_str(details.get("entries").map_or("[]", String::as_str))
            .map_err(|e| WorkspaceError::internal(format!("the node's listing: {e}")))?;
    let has_more = details.get("has_more").is_some_and(|m| m == "true");
    Ok(Listing { entries, has_more })
}

/// Deletes the file at `path`.
pub async fn delete<S: PlatformStore, C: Compute>(
    platform: &Platform<'_, S, C>,
    wait: Duration,
    environment: Environment,
    path: &WorkspacePath,
) -> Result<(), FilesError> {
    let sandbox = sandbox(platform, wait, environment).await?;
    let command = Command::WorkspaceDelete { sandbox_id: sandbox.id.clone(), path: path.relative() };
    workspace::run(platform.store, &sandbox, command).await?;
    Ok(())
}
