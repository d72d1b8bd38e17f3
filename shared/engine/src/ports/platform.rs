//! The ports of Platform Runs ([`crate::platform`]): the Runs of an environment and their
//! order, the environment's record (its sandbox, execution lease, rollback and outbox), the
//! sessions a Run's turn runs in, the workspace's sandbox and its processes, and the durable
//! queue of commands to a sandbox's node ([`crate::dispatch`]).
//!
//! A use case takes one bound: a narrow trait when it needs only that, else [`PlatformStore`]
//! (all of them, with the buckets and queues), which every store with the narrow ones has.

use agentplane_domain::sandbox::retention::StoredChunk;
use std::future::Future;

use super::commands::NodeCommands;

use agentplane_domain::ProjectId;
use agentplane_domain::platform::run::{Run, RunId};
use agentplane_domain::platform::{ActiveRollback, Environment, ExecutionLease, RollbackFailure};
use agentplane_domain::sandbox::{ProcessId, ProcessRecord, Sandbox, SandboxId};
use agentplane_domain::session::Session;
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_domain::{SessionId, Timestamp};

use super::blobs::Buckets;
use super::queues::Queues;
use super::{OutboxEvent, PortError, StoredTranscript};

/// The Runs of environments: each written on its `version` (a write that finds another version
/// is refused `Conflict`: read it again), and listed in an environment's order
/// (`environmentSequence`, from 1).
pub trait PlatformRuns: Send + Sync {
    /// Creates `run` with `environment_sequence` = `previous + 1`, together with the
    /// environment's `run_count` going from `previous` to it (and the environment put in the
    /// outbox); `Conflict` when the count moved meanwhile, or the session is not the
    /// environment's.
    fn create_run(&self, run: &Run, previous: u64) -> impl Future<Output = Result<(), PortError>> + Send;

    /// The Run `id` of `project`; `NotFound` when there is none.
    fn run(&self, project: &ProjectId, id: &RunId) -> impl Future<Output = Result<Run, PortError>> + Send;

    /// Writes `run` (its `version` one more than `expected`) if the stored Run is still at
    /// `expected`; `Conflict` otherwise.
    fn replace_run(&self, run: &Run, expected: u64) -> impl Future<Output = Result<(), PortError>> + Send;

    /// [`PlatformRuns::replace_run`], recording `events` (webhook events the change emits) in
    /// the same all-or-nothing write; they are sent on with [`PlatformRuns::send_events`] once
    /// it succeeded.
    fn replace_run_emitting(
        &self,
        run: &Run,
        expected: u64,
        events: &[OutboxEvent],
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// The environment's Runs numbered `from` through `through`, in order, as an index holds
    /// them: it lags behind the Runs themselves (a status may be older than the Run's, a Run
    /// just created may be missing), so a Run it lists is read again where its state matters.
    fn runs_in_order(
        &self,
        environment: &EnvironmentId,
        from: u64,
        through: u64,
    ) -> impl Future<Output = Result<Vec<Run>, PortError>> + Send;

    /// The ids of [`PlatformRuns::runs_in_order`] (the same lagging index).
    fn run_ids_in_order(
        &self,
        environment: &EnvironmentId,
        from: u64,
        through: u64,
    ) -> impl Future<Output = Result<Vec<RunId>, PortError>> + Send;

    /// Sends webhook events a write recorded on to their delivery (one message each). A failure
    /// is the caller's to log: the `webhook-retry` job sends what was never sent.
    fn send_events(&self, events: &[OutboxEvent]) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// The record of an environment: the sandbox bound to its workspace, the lease a Run executes
/// under, a rollback under way, and its place in the outbox (the environments whose queued work
/// may still need its message sent).
pub trait PlatformEnvironments: Send + Sync {
    /// The environment `id` of `project`; `NotFound` when there is none or it was deleted.
    fn environment(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
    ) -> impl Future<Output = Result<Environment, PortError>> + Send;

    /// Claims the environment's execution lease for the Run `run` (number `sequence`) until
    /// `until`, as `read` (the environment as the caller read it) allows: no rollback under
    /// way, no live lease of another Run and no claim since `read`. The lease's token is the
    /// environment's next fencing token; every Run through `settled` is recorded as ended.
    /// `Conflict`: read the environment again.
    fn claim_execution(
        &self,
        read: &Environment,
        run: &RunId,
        sequence: u64,
        settled: u64,
        now: Timestamp,
        until: Timestamp,
    ) -> impl Future<Output = Result<ExecutionLease, PortError>> + Send;

    /// Extends the lease `lease` to `until`; `Conflict` when it was lost (taken over, or
    /// released by a rollback's end).
    fn renew_execution(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        lease: &ExecutionLease,
        until: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Gives the lease back (a lease lost meanwhile is left as it is).
    fn release_execution(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        lease: &ExecutionLease,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Records the environment's first checkpoint (the manifest `manifest`); the first one
    /// recorded stays, later calls change nothing.
    fn set_initial_checkpoint(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        manifest: &str,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Binds the environment's workspace to `sandbox` if it is still bound to `previous`
    /// (`None`: to none); `Conflict` when another binding won.
    fn bind_sandbox(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        sandbox: &SandboxId,
        previous: Option<&SandboxId>,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Records the rollback `rollback` as under way (and puts the environment in the outbox);
    /// `Conflict` when one already is, or a Run was created after `rollback.through_sequence`.
    fn begin_rollback(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        rollback: &ActiveRollback,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Ends the rollback of the Run `run` (if it is still the one under way).
    fn end_rollback(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        run: &RunId,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Gives up the rollback of `failure.run_id` (if it is still the one under way): the
    /// environment is released and records why.
    fn fail_rollback(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        failure: &RollbackFailure,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Up to `limit` environments whose outbox is due at or before `now`, the oldest first.
    fn outbox_due(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Environment>, PortError>> + Send;

    /// Looks at the environment's outbox again a grace period after `now` (its work is open).
    fn reschedule_outbox(
        &self,
        environment: &Environment,
        now: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Takes the environment out of the outbox, if no Run was created and no rollback begun
    /// since `environment` was read (otherwise it stays in, and nothing is refused).
    fn clear_outbox(&self, environment: &Environment) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// The sessions Runs' turns run in, as the Platform use cases read and change them outside the
/// turn itself.
pub trait RunSessions: Send + Sync {
    /// The live session and its transcript (`None` when it has none yet), read together;
    /// `NotFound` when the session is gone.
    fn session_with_transcript(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> impl Future<Output = Result<(Session, Option<StoredTranscript>), PortError>> + Send;

    /// Which turn holds the session now (none: idle) and whether a cancel was recorded for it,
    /// read up to date; `NotFound` when the session is gone.
    fn turn_holder(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> impl Future<Output = Result<TurnHolder, PortError>> + Send;

    /// Records a cancel for the turn holding the session (it stops at its next step); the
    /// session as written. `Conflict` when no live turn holds it (or it is gone).
    fn cancel_turn(
        &self,
        project: &ProjectId,
        session: &SessionId,
        now: Timestamp,
    ) -> impl Future<Output = Result<Session, PortError>> + Send;

    /// Records that the turn `turn_id` died (the session idle again, whatever the turn's hold
    /// says); `false` when that turn no longer holds the session.
    fn settle_turn_of(
        &self,
        project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
        now: Timestamp,
    ) -> impl Future<Output = Result<bool, PortError>> + Send;

    /// Replaces the session's transcript with `body` (`None`: removes it), as a new version.
    fn restore_transcript(
        &self,
        project: &ProjectId,
        session: &SessionId,
        body: Option<&str>,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// The sandboxes workspaces run in and the processes a Run's commands start in them.
pub trait WorkspaceSandboxes: NodeCommands + Send + Sync {
    /// The sandbox `id`, of any project; `NotFound` when there is none.
    fn sandbox_record(&self, id: &SandboxId) -> impl Future<Output = Result<Sandbox, PortError>> + Send;

    /// Hands out the sandbox's next process number, only while the sandbox runs at `now`
    /// (`Conflict` otherwise).
    fn next_process_number(
        &self,
        sandbox: &SandboxId,
        now: Timestamp,
    ) -> impl Future<Output = Result<u32, PortError>> + Send;

    /// The recorded process `id` of the sandbox; `NotFound` until the node reported it.
    fn process_record(
        &self,
        sandbox: &SandboxId,
        id: ProcessId,
    ) -> impl Future<Output = Result<ProcessRecord, PortError>> + Send;

    /// The process's retained output after the chunk `after`, oldest first, at most `limit`
    /// chunks (those past their retention at `now` left out), and whether more follow.
    fn process_output(
        &self,
        sandbox: &SandboxId,
        process: ProcessId,
        after: Option<u64>,
        limit: usize,
        now: Timestamp,
    ) -> impl Future<Output = Result<OutputPage, PortError>> + Send;
}

/// Everything Platform Runs run over: their Runs, environments and sessions, the workspace's
/// sandboxes and node commands, the workspaces bucket and the queues. Every store that has
/// these has it.
pub trait PlatformStore:
    PlatformRuns + PlatformEnvironments + RunSessions + WorkspaceSandboxes + Buckets + Queues + Send + Sync
{
}

impl<T> PlatformStore for T where
    T: PlatformRuns
        + PlatformEnvironments
        + RunSessions
        + WorkspaceSandboxes
        + Buckets
        + Queues
        + Send
        + Sync
{
}

/// Who holds a session's turn, read in one strongly consistent read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnHolder {
    /// The holding turn (`None`: no turn holds the session).
    pub turn_id: Option<String>,
    /// A cancel was recorded for the holding turn.
    pub cancel_requested: bool,
}

/// One page of a process's retained output.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputPage {
    /// Oldest first.
    pub chunks: Vec<StoredChunk>,
    pub has_more: bool,
    /// Chunks past their retention were left out (the table had not removed them yet).
    pub expired: bool,
}
