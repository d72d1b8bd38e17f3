//! What a session's files read and write: the session they belong to, the attachment settings
//! of the agent it runs (its agent, the config its channel runs, the Document Store bucket that
//! config names), the file records (counted against the session's limit) and the bucket each
//! file's bytes are kept in.

use std::future::Future;

use agentplane_domain::bucket::BucketName;
use agentplane_domain::file::{FileId, SessionFile};
use agentplane_domain::{ProjectId, SessionId};

use super::PortError;
use super::agents::AgentAuthoring;
use super::blobs::Buckets;
use super::sessions::{Admission, LiveSessions};

/// Session files: their records and their bytes. The session they belong to is
/// [`LiveSessions`]', the session's agent and a registered bucket are [`AgentAuthoring`]'s, the
/// config an agent runs is [`Admission`]'s.
pub trait SessionFiles: LiveSessions + AgentAuthoring + Admission + Buckets + Send + Sync {
    /// The bucket a session file's bytes are kept in: `bucket` (a Document Store bucket the
    /// project registered), or the deployment's files bucket. An error in a function not
    /// granted object storage.
    fn file_objects(&self, bucket: Option<&BucketName>) -> Result<Self::Blobs, PortError>;

    /// The file `id` of the session; `NotFound` when there is none.
    fn file(
        &self,
        project: &ProjectId,
        session: &SessionId,
        id: &FileId,
    ) -> impl Future<Output = Result<SessionFile, PortError>> + Send;

    /// Writes a new file, counts it on its session and adds its size to its project's stored
    /// bytes, in one transaction; `Conflict` when the session has `max_files` files already or
    /// the project's stored bytes would pass `max_bytes`.
    fn create_file(
        &self,
        file: &SessionFile,
        max_files: u32,
        max_bytes: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// The bytes of session files the project stores (their declared sizes).
    fn stored_bytes(&self, project: &ProjectId) -> impl Future<Output = Result<u64, PortError>> + Send;

    /// Deletes the file's record and takes it off the session's file count; `NotFound` when it
    /// is gone.
    fn delete_session_file(
        &self,
        project: &ProjectId,
        session: &SessionId,
        id: &FileId,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}
