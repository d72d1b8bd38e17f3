//! A fork: a new environment whose workspace starts as a checkpoint another environment of the
//! same project returned (the use case is the engine's, [`agentplane_engine::platform::fork`]);
//! this surface checks the `snapshotId` the caller named.

use agentplane_domain::ProjectId;
use agentplane_domain::platform::Environment;

use super::error::PlatformError;
use super::platform;
use crate::App;

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
    Ok(agentplane_engine::platform::fork::fork(&platform(app), project, name, snapshot).await?)
}
