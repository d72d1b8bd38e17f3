//! A fork: a new environment whose workspace starts as a checkpoint another environment of the
//! same project returned (the use case is the engine's, [`agentplane_engine::platform::fork`]);
//! this surface checks the `snapshotId` the caller named.

use super::error::PlatformError;

/// A snapshot id is the SHA-256 of its manifest: 64 lowercase hexadecimal digits.
pub(super) fn snapshot_id(text: &str) -> Result<&str, PlatformError> {
    let hex = text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if hex {
        Ok(text)
    } else {
        Err(PlatformError::invalid("snapshotId", "`snapshotId` must be 64 lowercase hexadecimal digits"))
    }
}
