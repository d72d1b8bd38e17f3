//! Background runs (`agent_run`): a turn queued with `background: true` instead of holding the
//! HTTP call open. The `run-execution` job starts it once a slot of its tenant is free, runs the
//! turn across as many invocations as it needs (up to the run's ceiling), and records how it
//! ended. The status moves only forward, by conditional writes:
//!
//! ```text
//! queued ──► running ──► succeeded | failed | canceled
//!   │          │  ▲
//!   │          ▼  │
//!   │     requires_action ──► canceled
//!   └──► canceled
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::agent::Channel;
use crate::ids::AgentId;
use crate::ids::InvalidId;
use crate::pricing::Usage;
use crate::session::StopReason;
use crate::{ProjectId, SessionId, Timestamp};

crate::webhook::hex_id!(
    /// A background run: `run_` and 24 lowercase hex characters.
    RunId,
    "run_",
    "run"
);

impl RunId {
    /// The id of the turn the run executes (`turn_` and the run's hex), so that a continuation
    /// of that turn names its run without another index.
    pub fn turn_id(&self) -> String {
        format!("turn_{}", &self.as_str()["run_".len()..])
    }

    /// The run a turn id belongs to, when the turn is a background run's.
    pub fn of_turn(turn_id: &str) -> Option<Self> {
        turn_id.strip_prefix("turn_").and_then(|hex| format!("run_{hex}").parse().ok())
    }
}

/// The `runs` queue message that starts a background run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartRun {
    pub project_id: ProjectId,
    pub run_id: RunId,
}

/// Concurrent running background runs per tenant (`AGENT_BACKGROUND_MAX_CONCURRENT_RUNS_PER_TENANT`).
pub const DEFAULT_MAX_CONCURRENT_PER_TENANT: u32 = 10;
/// How long runs are kept (`AGENT_RUN_RETENTION_DAYS`).
pub const DEFAULT_RETENTION_DAYS: i64 = 30;
/// How long a slot stays held without being renewed: a crashed holder's slot comes back then.
pub const SLOT_LEASE_MS: i64 = 2 * 60_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    RequiresAction,
    Succeeded,
    Failed,
    Canceled,
}

impl RunStatus {
    pub const ALL: [RunStatus; 6] =
        [Self::Queued, Self::Running, Self::RequiresAction, Self::Succeeded, Self::Failed, Self::Canceled];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::RequiresAction => "requires_action",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Canceled => "canceled",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Canceled)
    }

    /// The webhook event type that announces the run reaching this status (none for `running`).
    pub fn event_type(self) -> Option<&'static str> {
        match self {
            Self::Queued => Some("agent_run.queued"),
            Self::Running => None,
            Self::RequiresAction => Some("agent_run.requires_action"),
            Self::Succeeded => Some("agent_run.succeeded"),
            Self::Failed => Some("agent_run.failed"),
            Self::Canceled => Some("agent_run.canceled"),
        }
    }
}

/// Why a run failed: a stable code and a message safe to show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    pub code: String,
    pub message: String,
}

/// A background run as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRun {
    pub id: RunId,
    pub project_id: ProjectId,
    pub session_id: SessionId,
    pub agent_id: AgentId,
    pub channel: Channel,
    #[serde(default)]
    pub version: Option<u32>,
    pub status: RunStatus,
    pub input: String,
    /// The image files of the input (session files), shown to the model by URLs presigned
    /// when the run starts (a queued run may wait longer than a URL lives).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_files: Vec<crate::file::FileId>,
    /// The run's ceiling: the agent's `background_max_duration_ms`, at most the deployment's.
    pub max_duration_ms: u64,
    #[serde(default)]
    pub callback_url: Option<String>,
    pub created_at: Timestamp,
    #[serde(default)]
    pub started_at: Option<Timestamp>,
    #[serde(default)]
    pub ended_at: Option<Timestamp>,
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    #[serde(default)]
    pub output_text: Option<String>,
    #[serde(default)]
    pub error: Option<RunError>,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub cost_usd: f64,
    /// Set by a cancel of a running run; the executor ends the turn at its next safe point.
    #[serde(default)]
    pub cancel_requested: bool,
    /// The ids of the actions a `requires_action` run waits for.
    #[serde(default)]
    pub pending_action_ids: Vec<String>,
    /// What the callback came to (until webhooks sign it: recorded here). Absent until then,
    /// so that recording it once can be conditional on its absence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback: Option<CallbackRecord>,
    /// While it is `running`: until when its executor holds it (renewed while the turn goes
    /// on). Past it, the executor is taken for dead and the retention sweep settles the run.
    /// Absent otherwise, and on runs stored before leases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<Timestamp>,
    /// When the stored run is deleted (the retention period after its creation).
    pub expires_at: Timestamp,
}

/// The callback a run owes when it ends: its URL and what happened when it was told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallbackRecord {
    pub url: String,
    pub event_type: String,
    pub recorded_at: Timestamp,
}

impl AgentRun {
    /// The run's deadline, counted from its start.
    pub fn deadline(&self) -> Option<Timestamp> {
        self.started_at.map(|at| at.plus_millis(i64::try_from(self.max_duration_ms).unwrap_or(i64::MAX / 2)))
    }

    /// How long the run may still go on at `now` (zero once past its ceiling).
    pub fn remaining_ms(&self, now: Timestamp) -> u64 {
        match self.deadline() {
            Some(deadline) => u64::try_from(deadline.unix_millis() - now.unix_millis()).unwrap_or(0),
            None => self.max_duration_ms,
        }
    }
}

/// What a turn's end makes of its run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnding {
    pub status: RunStatus,
    pub error: Option<RunError>,
}

/// The run status a turn's stop reason means. A turn that waits (for a person, or for a budget
/// to be raised) leaves the run `requires_action`; `error` is the turn's own failure, if any.
pub fn ending_of(stop_reason: StopReason, budget_paused: bool, error: Option<(String, String)>) -> RunEnding {
    let failed = |code: &str, message: &str| RunEnding {
        status: RunStatus::Failed,
        error: Some(RunError { code: code.to_owned(), message: message.to_owned() }),
    };
    match stop_reason {
        StopReason::EndTurn => RunEnding { status: RunStatus::Succeeded, error: None },
        StopReason::RequiresAction => RunEnding { status: RunStatus::RequiresAction, error: None },
        StopReason::BudgetReached if budget_paused => {
            RunEnding { status: RunStatus::RequiresAction, error: None }
        }
        StopReason::BudgetReached => failed("budget_reached", "the session budget ended the run"),
        StopReason::Cancelled => RunEnding { status: RunStatus::Canceled, error: None },
        StopReason::Limit => failed("limit", "the run reached a limit (its duration or its steps)"),
        StopReason::Error => {
            let (code, message) =
                error.unwrap_or_else(|| ("run_failed".to_owned(), "the run failed".to_owned()));
            RunEnding { status: RunStatus::Failed, error: Some(RunError { code, message }) }
        }
    }
}

/// The slot a tenant's running runs hold: `0..max` (`max` from the deployment).
pub fn slot_indexes(max: u32) -> impl Iterator<Item = u32> {
    0..max.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_names_its_turn_and_back() {
        let run = RunId::from_random([0xab; 12]);
        let turn = run.turn_id();
        assert_eq!(turn, format!("turn_{}", "ab".repeat(12)));
        assert_eq!(RunId::of_turn(&turn), Some(run));
        assert_eq!(RunId::of_turn("turn_123"), None);
        assert_eq!(RunId::of_turn("nope"), None);
    }

    #[test]
    fn statuses_spell_cancelled_with_one_l() {
        assert_eq!(RunStatus::Canceled.as_str(), "canceled");
        assert_eq!(serde_json::to_value(RunStatus::Canceled).ok(), Some(serde_json::json!("canceled")));
        for s in RunStatus::ALL {
            assert_eq!(RunStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(RunStatus::parse("cancelled"), None);
    }

    #[test]
    fn endings_map_stop_reasons_to_run_statuses() {
        assert_eq!(ending_of(StopReason::EndTurn, false, None).status, RunStatus::Succeeded);
        assert_eq!(ending_of(StopReason::RequiresAction, false, None).status, RunStatus::RequiresAction);
        assert_eq!(ending_of(StopReason::BudgetReached, true, None).status, RunStatus::RequiresAction);
        assert_eq!(ending_of(StopReason::BudgetReached, false, None).status, RunStatus::Failed);
        assert_eq!(ending_of(StopReason::Cancelled, false, None).status, RunStatus::Canceled);
        let failed = ending_of(StopReason::Error, false, Some(("model_error".into(), "m".into())));
        assert_eq!(failed.status, RunStatus::Failed);
        assert_eq!(failed.error.map(|e| e.code), Some("model_error".into()));
        assert!(RunStatus::Canceled.is_terminal() && !RunStatus::RequiresAction.is_terminal());
    }

    #[test]
    fn the_remaining_time_counts_from_the_start() {
        let mut run = AgentRun {
            id: RunId::from_random([1; 12]),
            project_id: ProjectId::from_random([1; 16]),
            session_id: SessionId::from_random([2; 16]),
            agent_id: AgentId::from_random([3; 16]),
            channel: Channel::Draft,
            version: None,
            status: RunStatus::Queued,
            input: "hi".into(),
            image_files: Vec::new(),
            max_duration_ms: 10_000,
            callback_url: None,
            created_at: Timestamp::from_unix_seconds(100),
            started_at: None,
            ended_at: None,
            stop_reason: None,
            output_text: None,
            error: None,
            usage: Usage::default(),
            cost_usd: 0.0,
            cancel_requested: false,
            pending_action_ids: Vec::new(),
            callback: None,
            lease_until: None,
            expires_at: Timestamp::from_unix_seconds(200),
        };
        assert_eq!(run.remaining_ms(Timestamp::from_unix_seconds(500)), 10_000);
        run.started_at = Some(Timestamp::from_unix_seconds(100));
        assert_eq!(run.remaining_ms(Timestamp::from_unix_millis(104_000)), 6_000);
        assert_eq!(run.remaining_ms(Timestamp::from_unix_seconds(111)), 0);
    }
}
