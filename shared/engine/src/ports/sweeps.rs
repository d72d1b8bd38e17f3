//! What the retention and cleanup steps read and delete: actions that waited too long, what
//! outlived its retention (session files, background runs, webhook delivery records), deleted
//! sessions and environments, the content of old Platform Runs, and the checkpoints of the
//! workspaces bucket nothing references any more.
//!
//! Each step is read in bounded pages, the oldest first, from an index of what is due; what a
//! step deletes leaves that index, so the next pass starts where this one stopped.

use std::collections::BTreeSet;
use std::future::Future;

use agentplane_domain::action::Action;
use agentplane_domain::agent_run::AgentRun;
use agentplane_domain::bucket::BucketName;
use agentplane_domain::event::EventType;
use agentplane_domain::file::{FileId, SessionFile};
use agentplane_domain::platform::Environment;
use agentplane_domain::platform::run::{Run, RunId};
use agentplane_domain::platform::workspace_sweep::{Cycle, ScanPosition, Swept};
use agentplane_domain::sandbox::{Sandbox, SandboxId};
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_domain::webhook::Message;
use agentplane_domain::{ProjectId, SessionId, Timestamp};

use super::PortError;
use super::background::{LapsedRuns, TenantResume};
use super::blobs::Buckets;
use super::sessions::Continuations;

/// How an erased event's data is rewritten: the data without its content, or `None` when the
/// event keeps its data as it is.
pub type EraseEventData = fn(&EventType, &serde_json::Value) -> Option<serde_json::Value>;

/// Pending actions that waited past their expiry, and the turns they paused.
pub trait ExpiringActions: Continuations + Send + Sync {
    /// Up to `limit` pending actions due at `now`, the earliest expiry first.
    fn due(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Action>, PortError>> + Send;

    /// Settles `action` `expired` if it is still pending; `Conflict` when it is not (answered or
    /// cancelled first), `NotFound` when it is gone.
    fn expire(
        &self,
        action: &Action,
        now: Timestamp,
    ) -> impl Future<Output = Result<Action, PortError>> + Send;

    /// Up to `limit` settled actions settled at or before `before` whose turn was not known to
    /// be carried on (a continuation that could not be sent).
    fn waiting(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Action>, PortError>> + Send {
        let _ = (before, limit);
        async { Ok(Vec::new()) }
    }
}

/// Everything one pass of the retention sweep reads and deletes (its steps with ports of their
/// own are supertraits).
pub trait RetentionStore:
    ExpiringActions + SessionPurgeStore + WorkspaceSweepStore + LapsedRuns + TenantResume + Buckets + Send + Sync
{
    /// Up to `limit` session files whose expiry is at or before `now`, the oldest first.
    fn expired_files(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<SessionFile>, PortError>> + Send;

    /// The bucket a session file's bytes are kept in: `bucket` (a bucket the project registered,
    /// even one it removed since), or the deployment's files bucket. An error in a function not
    /// granted object storage.
    fn file_bucket(&self, bucket: Option<&BucketName>) -> Result<Self::Blobs, PortError>;

    /// Deletes a session file's item and takes it off the session's file count; `NotFound`
    /// when it is gone.
    fn delete_file(
        &self,
        project: &ProjectId,
        session: &SessionId,
        id: &FileId,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Up to `limit` background runs whose retention ended at or before `now`, the oldest first.
    fn expired_agent_runs(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<AgentRun>, PortError>> + Send;

    /// Deletes a background run past its retention; `NotFound` when it is gone.
    fn delete_expired_agent_run(&self, run: &AgentRun) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Up to `limit` webhook messages whose delivery records' retention ended at or before
    /// `now`, the oldest first.
    fn expired_webhook_records(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Message>, PortError>> + Send;

    /// Deletes a webhook message with its attempts; `Conflict` when it was redelivered since it
    /// was read (it is kept), `NotFound` when it is gone.
    fn delete_webhook_records(&self, message: &Message)
    -> impl Future<Output = Result<(), PortError>> + Send;

    /// Rewrites sessions still stored in an older shape, at most `max_pages` pages from where
    /// the last pass stopped; how many it rewrote.
    fn upgrade_old_sessions(&self, max_pages: usize)
    -> impl Future<Output = Result<usize, PortError>> + Send;
}

/// Deleted sessions waiting for their purge, and what each still holds.
pub trait SessionPurgeStore: Send + Sync {
    /// Up to `limit` deleted sessions whose purge is due at `now`, the oldest deletion first.
    fn sessions_to_purge(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<PurgeDue>, PortError>> + Send;

    /// The items the session still has (transcript, files and their count, actions, feedback),
    /// whatever their state.
    fn owned_items(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> impl Future<Output = Result<Vec<OwnedItem>, PortError>> + Send;

    /// Deletes a file's bytes from the bucket it lives in (bytes already gone count as deleted).
    fn delete_file_object(&self, file: &SessionFile) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Deletes the session's objects in the files bucket (its transcript bodies); how many.
    fn delete_session_objects(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> impl Future<Output = Result<usize, PortError>> + Send;

    /// Deletes the session's event log; how many events.
    fn delete_session_events(
        &self,
        session: &SessionId,
    ) -> impl Future<Output = Result<usize, PortError>> + Send;

    /// Deletes `items` (items already gone count as deleted).
    fn delete_owned_items(&self, items: &[OwnedItem]) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Strips the session's title and metadata, marks it purged and takes it out of the purge
    /// queue; `false` when it was purged already.
    fn finish_purge(
        &self,
        project: &ProjectId,
        session: &SessionId,
        now: Timestamp,
    ) -> impl Future<Output = Result<bool, PortError>> + Send;
}

/// The checkpoint manifests live environments and Runs reference.
pub trait CheckpointReferences: Send + Sync {
    /// One page of the consistent walk over every environment and Run: the manifests the
    /// `limit` items after `after` reference, and where the next page starts (`None`: the
    /// walk is over).
    fn checkpoint_references(
        &self,
        after: Option<&ScanPosition>,
        limit: usize,
    ) -> impl Future<Output = Result<(BTreeSet<String>, Option<ScanPosition>), PortError>> + Send;
}

/// The mark-and-sweep cycle over the workspaces bucket: its cursor and the marks of the blobs
/// and manifests a cycle found referenced.
pub trait WorkspaceSweepStore: CheckpointReferences + Send + Sync {
    /// The cycle as the last page left it; `None` before the first cycle.
    fn sweep_cursor(&self) -> impl Future<Output = Result<Option<Cycle>, PortError>> + Send;

    /// Saves `next` as the cursor, if the saved one is still the version before it; `Conflict`
    /// when another sweep moved it first.
    fn advance_sweep(&self, next: &Cycle) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Those of the manifests `ids` marked in cycle `cycle`.
    fn marked_manifests(
        &self,
        cycle: u64,
        ids: &BTreeSet<String>,
    ) -> impl Future<Output = Result<BTreeSet<String>, PortError>> + Send;

    /// Marks `digests` (blobs or manifests, as `kind` says) in cycle `cycle`.
    fn mark(
        &self,
        cycle: u64,
        kind: Swept,
        digests: &[&str],
        now: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// The digests of `kind` marked in cycle `cycle` from `first` through `last`.
    fn marked_between(
        &self,
        cycle: u64,
        kind: Swept,
        first: &str,
        last: &str,
    ) -> impl Future<Output = Result<BTreeSet<String>, PortError>> + Send;
}

/// Deleted Platform environments and what each held: its sandbox, its Runs and their saved
/// transcripts, its sessions' links, its checkpoints.
pub trait EnvironmentPurgeStore: CheckpointReferences + Buckets + Send + Sync {
    /// Up to `limit` environments deleted at or before `now`, the oldest deletion first.
    fn deleted_environments(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Environment>, PortError>> + Send;

    /// A sandbox of any project; `NotFound` when it is gone.
    fn sandbox_record(&self, id: &SandboxId) -> impl Future<Output = Result<Sandbox, PortError>> + Send;

    /// Records on the deleted environment the manifests it and its Runs referenced (what its
    /// purge may delete), removing its own references.
    fn set_purge_manifests(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        manifests: &[String],
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Up to `limit` Runs of the environment after its sequence number `after`, in order.
    fn environment_runs(
        &self,
        environment: &EnvironmentId,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Run>, PortError>> + Send;

    /// Deletes a Run (a Run already gone counts as deleted).
    fn delete_run(
        &self,
        project: &ProjectId,
        id: &RunId,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Deletes the links of the environment's sessions; how many.
    fn delete_environment_links(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
    ) -> impl Future<Output = Result<usize, PortError>> + Send;

    /// Deletes the deleted environment's item, the last step of its purge (one gone already, or
    /// not marked deleted, is left as it is).
    fn delete_purged_environment(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// The content retention of Platform Runs: the Runs due for a look, the Runs, and their turns'
/// events.
pub trait RunContentStore: Buckets + Send + Sync {
    /// Up to `limit` Runs due for a look at or before `until`, the oldest first.
    fn content_due(
        &self,
        until: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<ContentDue>, PortError>> + Send;

    /// Takes the Run out of the due index (its content is erased, or it is gone).
    fn content_done(&self, due: &ContentDue) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Moves the Run's look on to `at`.
    fn postpone_content(
        &self,
        due: &ContentDue,
        at: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// A Run; `NotFound` when it is gone.
    fn run(&self, project: &ProjectId, id: &RunId) -> impl Future<Output = Result<Run, PortError>> + Send;

    /// Rewrites the events of the session's turn `turn` whose data `erase` changes; how many.
    fn erase_turn_events(
        &self,
        session: &SessionId,
        turn: &str,
        erase: EraseEventData,
    ) -> impl Future<Output = Result<usize, PortError>> + Send;

    /// Writes `run` over the stored Run if that is still at version `expected`; `Conflict`
    /// when it changed since.
    fn replace_run(&self, run: &Run, expected: u64) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// One item of the session's in the main table (its keys, and the file it holds, if one).
#[derive(Debug, Clone)]
pub struct OwnedItem {
    pub pk: String,
    pub sk: String,
    /// A file item's file (its bytes are deleted before the item).
    pub file: Option<SessionFile>,
    /// A feedback item's locator sort key (deleted with it).
    pub locator: Option<String>,
}

/// A Run whose content the retention step will look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentDue {
    pub project_id: ProjectId,
    pub run_id: RunId,
}

/// A deleted session waiting for its purge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeDue {
    pub project: ProjectId,
    pub session: SessionId,
}
