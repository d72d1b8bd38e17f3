//! The writes of a turn, as [`super::TurnStore`] takes them, and what they answer: one write
//! starts a turn, one commits each step, each all or nothing.

use agentplane_domain::action::Action;
use agentplane_domain::agent::Channel;
use agentplane_domain::event::{Event, NewEvent};
use agentplane_domain::ids::AgentId;
use agentplane_domain::pricing::Usage;
use agentplane_domain::session::StopReason;
use agentplane_domain::{ProjectId, SessionId, Timestamp};

use super::PortError;
use super::outbox::OutboxEvent;

/// Why a turn's write was refused (nothing of it remains).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A live turn holds the session.
    Busy,
    /// The session's turn is paused for actions.
    Paused,
    /// The session's turn is paused by its budget.
    BudgetPaused,
    /// No live session.
    Gone,
    /// Another writer saved the transcript since the caller read it.
    TranscriptMoved,
    /// The writing turn no longer holds the session, or a cancel was recorded for it: the
    /// caller reads the hold to tell which.
    NotHeld,
}

#[derive(Debug, thiserror::Error)]
pub enum TurnWriteError {
    #[error("refused: {0:?}")]
    Refused(Refused),
    #[error(transparent)]
    Store(#[from] PortError),
}

/// Starting a turn.
#[derive(Debug, Clone)]
pub struct TurnStart<'a> {
    pub project: &'a ProjectId,
    pub session: &'a SessionId,
    pub turn_id: &'a str,
    pub agent: &'a AgentId,
    pub channel: Channel,
    pub now: Timestamp,
    pub hold_until: Timestamp,
    /// The turn's first events (`turn.started`, the user's message).
    pub events: &'a [NewEvent],
    pub retention_days: i64,
    /// One past the last event number the caller knows of.
    pub from_seq: u64,
    /// The transcript version the caller read (0: none).
    pub transcript_version: u64,
    /// Earlier turns this one replaces (regenerate, edit): added to the session's
    /// `superseded_turns` in the same write.
    pub supersedes: &'a [String],
}

/// What the session does after a step.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionMove {
    /// The turn holds it on.
    Stay,
    /// The turn ends: idle, with this stop reason.
    End(StopReason),
    /// The turn pauses for the commit's actions (`requires_action`), or for its budget
    /// (`budget`: `budget_paused`); the transcript version this commit writes is the one a
    /// continuation claims.
    Pause { budget: bool },
    /// The turn hands itself over to a continuation (a background run nearing its invocation's
    /// end): the session stays `running` and held until `hold_until`, and the transcript version
    /// this commit writes is the one the continuation claims.
    HandOver { hold_until: Timestamp },
}

/// The transcript a step saves.
#[derive(Debug, Clone)]
pub struct TranscriptWrite<'a> {
    pub body: &'a str,
    /// The version the turn holds (0: none yet).
    pub expected: u64,
    /// The S3 object the held version lives in, if any (deleted once replaced).
    pub replaces: Option<&'a str>,
    /// The saved state of a pausing turn.
    pub paused: Option<&'a str>,
}

/// One step of a turn, written at once.
#[derive(Debug, Clone)]
pub struct StepCommit<'a> {
    pub project: &'a ProjectId,
    pub session: &'a SessionId,
    pub turn_id: &'a str,
    pub now: Timestamp,
    pub events: &'a [NewEvent],
    pub retention_days: i64,
    pub from_seq: u64,
    /// A model call's usage (`None` cost: unpriced).
    pub usage: Option<(Usage, Option<f64>)>,
    pub transcript: Option<TranscriptWrite<'a>>,
    pub session_move: SessionMove,
    /// The actions a pausing step creates.
    pub actions: &'a [Action],
    /// Write even though a cancel was recorded for the turn (the commit that ends it so).
    pub despite_cancel: bool,
    /// The tenant key whose monthly spend counter the usage's cost is added to (a project of
    /// a tenant), in the same transaction.
    pub spend_counter: Option<&'a str>,
    /// The webhook events this step emits, written in its transaction (see `webhook_events`).
    pub emit: &'a [OutboxEvent],
}

/// What a committed step wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    pub events: Vec<Event>,
    /// The transcript's new version and the S3 object it lives in (if any).
    pub transcript: Option<(u64, Option<String>)>,
}

/// A stored transcript: its body (JSON, the engine's to read) and its version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredTranscript {
    pub body: String,
    pub version: u64,
    /// The saved state of a turn paused at this version (JSON, the engine's); `None` when no
    /// turn is paused.
    pub paused: Option<String>,
    /// The S3 key the body was read from, when it lives in S3.
    pub object: Option<String>,
}
