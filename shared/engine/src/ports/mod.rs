//! The ports the engine drives: narrow traits named for what a use case needs, so the turn loop,
//! the event bus and the sampler never name a storage backend. The store crate implements them
//! over DynamoDB, S3 and SQS (its `ports` module); unit tests implement them in memory. The
//! engine does not depend on the store: the store depends on these traits and types.
//!
//! The ports are grouped by what they hold: this module has the turn's ports and the telemetry
//! and sandbox ones; [`blobs`] and [`queues`] are object storage and the queues every use case
//! shares; a use case area with ports of its own has a submodule beside them.
//!
//! Every port answers [`PortError`] (which the surfaces map to responses):
//! `NotFound` when the thing is gone, `Conflict` when a write's condition did not hold.

pub mod actions;
pub mod agents;
pub mod background;
pub mod blobs;
pub mod buckets;
pub mod client_sessions;
pub mod commands;
pub mod environments;
mod error;
pub mod feedback;
pub mod files;
pub mod nodes;
pub mod outbox;
pub mod platform;
pub mod processes;
pub mod queues;
pub mod runs;
pub mod sandboxes;
pub mod sessions;
pub mod sweeps;
pub mod tenants;
pub mod turn_writes;
pub mod webhooks;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;

use agentplane_domain::action::{Action, ActionId, Continuation};
use agentplane_domain::event::{Event, NewEvent};
use agentplane_domain::pricing::Usage;
use agentplane_domain::sandbox::request::CreateSandbox;
use agentplane_domain::sandbox::retention::ChunkMeta;
use agentplane_domain::sandbox::{Lifecycle, ProcessId, ProcessRecord, Sandbox, SandboxId};
use agentplane_domain::session::{Session, StopReason};
use agentplane_domain::telemetry::{RuntimeSample, SandboxCounters};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use tokio::time::Instant;

use crate::chat::{ChatMessage, ModelError, ModelReply, ToolDefinition};

pub use agentplane_domain::allocation::Allocation;
pub use agentplane_domain::sandbox::retention::{RetentionState, StoredChunk};
pub use error::PortError;
pub use outbox::OutboxEvent;
pub use turn_writes::{
    Committed, Refused, SessionMove, StepCommit, StoredTranscript, TranscriptWrite, TurnStart, TurnWriteError,
};

/// Who holds a session's turn, as the turn loop checks before each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnHold {
    /// The asking turn still holds the session.
    Held,
    /// Another turn holds it, or the hold was settled as dead: the asking turn lost its lease.
    Lost,
    /// The asking turn still holds the session, and a cancel was recorded for it: it stops at
    /// this step and releases the session with `cancelled`.
    Cancelled,
}

/// Everything a turn reads and writes of its session: one turn at a time, held until a
/// deadline; each step written at once (events, usage, state, transcript, actions); paused turns
/// claimed once by their continuation.
pub trait TurnStore: Send + Sync {
    /// Holds the session for a new turn (idle, or its holder died) and appends its first
    /// events, over the transcript version the caller read. Refused: `Busy`, `Paused`, `Gone`,
    /// `TranscriptMoved` (read it again).
    fn begin(&self, start: &TurnStart<'_>)
    -> impl Future<Output = Result<Vec<Event>, TurnWriteError>> + Send;

    /// One step, all or nothing, while the turn holds the session (and, unless
    /// `despite_cancel`, has no cancel recorded). Refused: `NotHeld` (read [`TurnStore::turn_hold`]
    /// for why), `TranscriptMoved`.
    fn commit(
        &self,
        commit: &StepCommit<'_>,
    ) -> impl Future<Output = Result<Committed, TurnWriteError>> + Send;

    /// Whether `turn_id` still holds the live session (and whether it was cancelled), in one
    /// read; `NotFound` once the session is deleted.
    fn turn_hold(
        &self,
        project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
    ) -> impl Future<Output = Result<TurnHold, PortError>> + Send;

    /// Adds one model call's usage outside a step (a turn that lost its hold still paid for
    /// its call); `NotFound` for a deleted session.
    fn add_usage(
        &self,
        project: &ProjectId,
        session: &SessionId,
        usage: Usage,
        cost_usd: Option<f64>,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// What a tenant's projects spent in `month` (USD).
    fn tenant_spent(
        &self,
        tenant_key: &str,
        month: &str,
    ) -> impl Future<Output = Result<f64, PortError>> + Send;

    /// Notes that the limit of the tenant `tenant_key` pauses the session's turn, before the
    /// pausing write, so that a raise of the limit (or a new month) finds the turn again
    /// (`tenant_resume`). Stores without tenants note nothing.
    fn note_tenant_pause(
        &self,
        _tenant_key: &str,
        _project: &ProjectId,
        _session: &SessionId,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        async { Ok(()) }
    }

    /// The tenant `tenant_key`'s monthly limit as it is now (a paused turn saved the one it
    /// started with: a raise since must count); stores without tenants answer `saved`.
    fn tenant_limit(
        &self,
        _tenant_key: &str,
        saved: Option<f64>,
    ) -> impl Future<Output = Result<Option<f64>, PortError>> + Send {
        async move { Ok(saved) }
    }

    /// The session's transcript and its version; `None` when it has none yet.
    fn load_transcript(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> impl Future<Output = Result<Option<StoredTranscript>, PortError>> + Send;

    /// Claims the turn paused at `version` (`requires_action` → `running` until `hold_until`);
    /// `None` when this claim is not the one (claimed already, cancelled, or gone).
    fn claim(
        &self,
        continuation: &Continuation,
        now: Timestamp,
        hold_until: Timestamp,
    ) -> impl Future<Output = Result<Option<Session>, PortError>> + Send;

    /// Actions of a session by id.
    fn actions(
        &self,
        project: &ProjectId,
        session: &SessionId,
        ids: &[ActionId],
    ) -> impl Future<Output = Result<Vec<Action>, PortError>> + Send;

    /// Every pending action of a session.
    fn pending_actions(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> impl Future<Output = Result<Vec<Action>, PortError>> + Send;

    /// Cancels the pending actions of `turn_id` (each only if still pending); the ones it did.
    fn cancel_actions(
        &self,
        project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
        now: Timestamp,
    ) -> impl Future<Output = Result<Vec<Action>, PortError>> + Send;

    /// Whether the project has any webhook endpoint (a turn that was not told emits events only
    /// then). Stores without webhooks answer `false`.
    fn has_webhooks(&self, _project: &ProjectId) -> impl Future<Output = Result<bool, PortError>> + Send {
        async { Ok(false) }
    }

    /// Sends events a committed step emitted on to their delivery; a failure is only logged
    /// (the `webhook-retry` job fans out what was never sent).
    fn dispatch_webhooks(&self, _events: &[OutboxEvent]) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Ends the paused turn `turn_id` from outside (idle, `stop_reason`) with `events` and the
    /// webhook events `emit`, in one write; refused `NotHeld` when it is not paused any more.
    #[allow(clippy::too_many_arguments)]
    fn end_paused(
        &self,
        project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
        stop_reason: StopReason,
        events: &[NewEvent],
        from_seq: u64,
        now: Timestamp,
        retention_days: i64,
        emit: &[OutboxEvent],
    ) -> impl Future<Output = Result<Vec<Event>, TurnWriteError>> + Send;
}

/// The session event log: append-only, gapless per session.
pub trait EventLog: Send + Sync {
    /// Appends `events` in order, each with the next free sequence number; `from` is a start
    /// hint (one past a number this log handed out), `None` reads the current end first.
    fn append_events(
        &self,
        session: &SessionId,
        events: Vec<NewEvent>,
        now: Timestamp,
        retention_days: i64,
        from: Option<u64>,
    ) -> impl Future<Output = Result<Vec<Event>, PortError>> + Send;
}

/// The model behind an agent.
pub trait ChatModel: Send + Sync {
    /// One completion of `messages` with `tools` offered, finished before `deadline`.
    fn complete(
        &self,
        model: &str,
        messages: &[ChatMessage],
        tools: &[ToolDefinition],
        deadline: Instant,
    ) -> impl Future<Output = Result<ModelReply, ModelError>> + Send;

    /// [`Self::complete`], handing each piece of the answer's text to `text` as it arrives (a
    /// model that cannot stream gives it whole, at the end). Once text went out, a failure is
    /// [`ModelError::StreamBroken`] with what went out, and the call is not retried.
    fn complete_streamed(
        &self,
        model: &str,
        messages: &[ChatMessage],
        tools: &[ToolDefinition],
        deadline: Instant,
        text: &(dyn Fn(&str) + Send + Sync),
    ) -> impl Future<Output = Result<ModelReply, ModelError>> + Send {
        async move {
            let reply = self.complete(model, messages, tools, deadline).await?;
            if let Some(answer) = &reply.text {
                text(answer);
            }
            Ok(reply)
        }
    }
}

/// The managed allocations that are not stopped (what the sampler walks).
pub trait LiveAllocations: Send + Sync {
    fn live_allocations(&self) -> impl Future<Output = Result<Vec<Allocation>, PortError>> + Send;
}

/// Many live sessions at once, by id (deleted and missing ones left out).
pub trait SessionReader: Send + Sync {
    fn sessions_by_id(
        &self,
        keys: &[(ProjectId, SessionId)],
    ) -> impl Future<Output = Result<HashMap<SessionId, Session>, PortError>> + Send;
}

/// Runtime samples, written once per allocation and interval.
pub trait SampleLog: Send + Sync {
    /// One result per sample, in order: `Ok(true)` written, `Ok(false)` already there.
    fn put_samples(
        &self,
        samples: &[(SessionId, i64, RuntimeSample)],
    ) -> impl Future<Output = Vec<Result<bool, PortError>>> + Send;
}

/// The latest counters sandbox nodes reported for their sandboxes.
pub trait SandboxCounterLog: Send + Sync {
    fn sandbox_counters(
        &self,
        sandbox_id: &str,
    ) -> impl Future<Output = Result<Option<SandboxCounters>, PortError>> + Send;

    /// Sandboxes without counters are left out.
    fn sandbox_counters_many(
        &self,
        sandbox_ids: &[&str],
    ) -> impl Future<Output = Result<HashMap<String, SandboxCounters>, PortError>> + Send;
}

/// Sandbox records, as compute placement and node reports read and change them.
pub trait SandboxRecords: Send + Sync {
    /// A sandbox of any project.
    fn sandbox(&self, id: &SandboxId) -> impl Future<Output = Result<Sandbox, PortError>> + Send;

    /// Moves the sandbox from `from` to `to` (conditional on `from`: `Conflict` otherwise).
    fn transition_sandbox(
        &self,
        sandbox: &Sandbox,
        from: &Lifecycle,
        to: &Lifecycle,
    ) -> impl Future<Output = Result<Sandbox, PortError>> + Send;

    /// Records what the node reports about the sandbox's isolation.
    fn set_isolation(
        &self,
        id: &SandboxId,
        isolation: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// Binding a Session's allocation to the sandbox running its compute.
pub trait AllocationBinding: Send + Sync {
    /// Binds the allocation to `sandbox_id` and marks it running; `replacing` is the sandbox it
    /// must still be bound to (`None`: none yet). `NotFound` without an allocation; `Conflict`
    /// when it is stopped or bound to another sandbox.
    fn activate_allocation(
        &self,
        project: &ProjectId,
        session: &SessionId,
        sandbox_id: &SandboxId,
        replacing: Option<&SandboxId>,
        now: Timestamp,
    ) -> impl Future<Output = Result<Allocation, PortError>> + Send;
}

/// The compute sandboxes run on: a node is picked and asked to start or end one.
pub trait Compute: Send + Sync {
    /// Why a launch failed (shown in logs only).
    type Error: std::fmt::Display + Send;

    /// Starts a sandbox for `project` (for a Session's managed compute when `session` is set).
    fn launch(
        &self,
        project: ProjectId,
        new: CreateSandbox,
        session: Option<SessionId>,
    ) -> impl Future<Output = Result<Sandbox, Self::Error>> + Send;

    /// Ends the sandbox (recorded killed, its node told); failures are the node's to settle.
    fn end(&self, sandbox: &Sandbox) -> impl Future<Output = ()> + Send;
}

/// The observed processes of sandboxes, their retained output and its retention index.
pub trait ProcessObservations: Send + Sync {
    /// The sandbox's retention index and its version (for [`ProcessObservations::save_index`]).
    fn load_index(
        &self,
        sandbox: &SandboxId,
    ) -> impl Future<Output = Result<(RetentionState, u64), PortError>> + Send;

    /// Saves the index, conditionally on `version` (`Conflict` when another writer saved first).
    fn save_index(
        &self,
        sandbox: &SandboxId,
        state: &RetentionState,
        version: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    fn processes(
        &self,
        sandbox: &SandboxId,
    ) -> impl Future<Output = Result<Vec<ProcessRecord>, PortError>> + Send;

    /// Records a started process; `Conflict` when it is recorded already.
    fn put_process(
        &self,
        sandbox: &SandboxId,
        record: &ProcessRecord,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Records a process seen live; an older record of the pid that no longer runs is replaced
    /// and returned.
    fn put_seen_process(
        &self,
        sandbox: &SandboxId,
        record: &ProcessRecord,
    ) -> impl Future<Output = Result<Option<ProcessRecord>, PortError>> + Send;

    fn record_exit(
        &self,
        sandbox: &SandboxId,
        id: ProcessId,
        exit_code: Option<i32>,
        signal: Option<i32>,
        at: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Marks the sandbox's running processes as having an observation gap.
    fn mark_gap(&self, sandbox: &SandboxId) -> impl Future<Output = Result<(), PortError>> + Send;

    fn set_truncated(
        &self,
        sandbox: &SandboxId,
        id: ProcessId,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    fn delete_process(
        &self,
        sandbox: &SandboxId,
        id: ProcessId,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    fn put_chunks(
        &self,
        sandbox: &SandboxId,
        chunks: Vec<StoredChunk>,
        now: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    fn delete_chunks(
        &self,
        sandbox: &SandboxId,
        chunks: &[ChunkMeta],
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}
