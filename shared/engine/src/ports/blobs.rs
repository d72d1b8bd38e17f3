//! Object storage as the use cases see it: a bucket of blobs by key (workspace checkpoints and
//! their manifests, transcripts, file bytes), listed in pages, presigned for a node to reach.

use std::future::Future;
use std::time::Duration;

use agentplane_domain::Timestamp;

use super::PortError;

/// One object of a listing: its key and when it was last written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub key: String,
    pub written: Timestamp,
}

/// How many keys one DeleteObjects takes at most.
pub const DELETE_BATCH: usize = 1_000;

/// One bucket.
pub trait Blobs: Send + Sync {
    /// Writes `body` at `key` (replacing what was there).
    fn put(&self, key: &str, body: Vec<u8>) -> impl Future<Output = Result<(), PortError>> + Send;

    /// The blob at `key`; `NotFound` when there is none.
    fn get(&self, key: &str) -> impl Future<Output = Result<Vec<u8>, PortError>> + Send;

    /// Deletes the blob at `key` (a missing one is no error).
    fn delete(&self, key: &str) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Deletes `keys` ([`DELETE_BATCH`] to a call); how many it deleted.
    fn delete_many(&self, keys: &[String]) -> impl Future<Output = Result<usize, PortError>> + Send;

    /// At most `limit` blobs under `prefix` after the key `after`, in key order, and whether
    /// more follow.
    fn list_page(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<(Vec<Listed>, bool), PortError>> + Send;

    /// When the blob at `key` was last written; `None` when there is none.
    fn written_at(&self, key: &str) -> impl Future<Output = Result<Option<Timestamp>, PortError>> + Send;

    /// Writes the blob at `key` again in place (its age starts over); `false` when there is none.
    fn refresh(&self, key: &str, content_type: &str) -> impl Future<Output = Result<bool, PortError>> + Send;

    /// A URL that reads `key` without credentials, for `expires`.
    fn presign_get(
        &self,
        key: &str,
        expires: Duration,
    ) -> impl Future<Output = Result<String, PortError>> + Send;

    /// A URL that writes `key` without credentials, for `expires`: only a body of `size` bytes
    /// and the type `content_type`.
    fn presign_put(
        &self,
        key: &str,
        content_type: &str,
        size: u64,
        expires: Duration,
    ) -> impl Future<Output = Result<String, PortError>> + Send;

    /// A URL that writes `key` (any size and type) without credentials, for `expires`.
    fn presign_put_any(
        &self,
        key: &str,
        expires: Duration,
    ) -> impl Future<Output = Result<String, PortError>> + Send;
}

/// The buckets a deployment has; a function without the grant to one answers an error when
/// asked for it.
pub trait Buckets: Send + Sync {
    type Blobs: Blobs;

    /// Workspace checkpoints, their manifests and saved Run transcripts.
    fn workspaces(&self) -> Result<&Self::Blobs, PortError>;

    /// Session objects: large transcripts, file bytes.
    fn objects(&self) -> Result<&Self::Blobs, PortError>;
}
