//! Runs: one task an agent does on an environment's workspace, in one of its sessions. Their
//! order across every session of the environment is `environment_sequence` (gapless, assigned
//! with the Run's creation). Execution, file diff and checkpoint settle independently.

use serde::{Deserialize, Serialize};

use super::path::WorkspacePath;
use crate::ids::uuid_id;
use crate::telemetry::EnvironmentId;
use crate::{ProjectId, SessionId, Timestamp, ValidationError};

use std::fmt;
use std::str::FromStr;
use uuid::Uuid;

use crate::ids::InvalidId;

mod request;
mod rollback;
#[cfg(test)]
mod tests;

pub use request::NewRun;
pub use rollback::{
    DIFF_UNKNOWN_AFTER_ROLLBACK, ROLLBACK_FAILED, RestorePoint, RollbackMessage, begin_revert,
    latest_manifest, restore_point, revert, unrevert,
};

uuid_id!(
    /// A Run.
    RunId,
    "run"
);

pub const MAX_MODEL_CHARS: usize = 256;
pub const MAX_INPUT_CHARS: usize = 100_000;
pub const MAX_FILES: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    Completed,
    Failed,
    Stopped,
    Reverting,
    Reverted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
            Self::Reverting => "reverting",
            Self::Reverted => "reverted",
        }
    }

    /// Execution ended (by itself or by a stop); a rollback may still revert it.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Stopped)
    }

    pub fn is_reverted(self) -> bool {
        matches!(self, Self::Reverting | Self::Reverted)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffStatus {
    Pending,
    Ready,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointStatus {
    Pending,
    Ready,
    Failed,
    Skipped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// A file the Run names, checked to exist as a regular file before execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFile {
    /// Canonical absolute path (`/workspace/…`).
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    pub kind: ChangeKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub status: CheckpointStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub id: RunId,
    pub project_id: ProjectId,
    pub environment_id: EnvironmentId,
    pub session_id: SessionId,
    pub environment_sequence: u64,
    pub model: String,
    pub input: String,
    #[serde(default)]
    pub files: Vec<RunFile>,
    pub status: RunStatus,
    #[serde(default)]
    pub stop_requested: bool,
    #[serde(default)]
    pub steering_enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
    #[serde(default)]
    pub file_diff: Vec<FileChange>,
    pub file_diff_status: DiffStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_diff_error: Option<String>,
    pub checkpoint: Checkpoint,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_deleted_at: Option<Timestamp>,
    /// The manifest of the workspace as the Run started (what its diff starts from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_manifest: Option<String>,
    /// Sandbox time the execution measured (milliseconds).
    #[serde(default)]
    pub sandbox_runtime_ms: u64,
    /// USD per sandbox-second when the Run was created: its `sandboxAmountUsd` is priced at
    /// it, so a later price change never rewrites a posted charge (absent: created at price 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_usd_per_second: Option<super::sandbox_price::SandboxPrice>,
    /// The status the Run had when a rollback took it (`reverting`): what it returns to should
    /// the rollback fail ([`unrevert`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted_from: Option<RunStatus>,
    /// Bumped by every write: each change is conditional on the version it read.
    #[serde(default)]
    pub version: u64,
}

/// The `runs` queue message (`{"kind": "platform_run", …}`) that executes a queued Run. A
/// duplicate finds the Run no longer queued and does nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecuteRun {
    pub project_id: ProjectId,
    pub run_id: RunId,
}

/// The diagnostic of a running Run whose sandbox cannot be reached (cleared once it can).
pub const RUNTIME_UNAVAILABLE: &str = "platform_runtime_unavailable";
/// A file the Run names is missing, not a regular file, or not of the digest given.
pub const FILE_INVALID: &str = "run_file_invalid";

impl RunStatus {
    /// The webhook event announcing that a Run reached this status (none for the others).
    pub fn event_type(self) -> Option<&'static str> {
        match self {
            Self::Completed => Some("run.completed"),
            Self::Failed => Some("run.failed"),
            Self::Stopped => Some("run.stopped"),
            Self::Reverted => Some("run.reverted"),
            Self::Queued | Self::Running | Self::Reverting => None,
        }
    }
}

impl Run {
    /// The id of the session turn that executes the Run.
    pub fn turn_id(&self) -> String {
        format!("turn_{}", self.id.as_uuid().simple())
    }
}

/// What an execution's end makes of a Run: the turn's stop reason and error, and whether a stop
/// was requested. A turn that answered completes even when a stop came too late to matter.
pub fn ending(
    stop: crate::session::StopReason,
    error: Option<(String, String)>,
) -> (RunStatus, Option<RunError>) {
    use crate::session::StopReason as S;
    match stop {
        S::EndTurn => (RunStatus::Completed, None),
        S::Cancelled => (RunStatus::Stopped, None),
        S::Limit => (
            RunStatus::Failed,
            Some(RunError {
                code: "run_limit_reached".into(),
                message: "the Run reached its time or step limit".into(),
            }),
        ),
        S::Error | S::RequiresAction | S::BudgetReached => {
            let (code, message) =
                error.unwrap_or_else(|| ("run_failed".into(), "the Run's execution failed".into()));
            (RunStatus::Failed, Some(RunError { code, message }))
        }
    }
}

/// What a stop request does to a Run in `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopEffect {
    /// Queued: stopped at once (it never runs).
    StopNow,
    /// Running: `stop_requested` is recorded; the execution stops at its next safe point.
    Request,
    /// Finished already: nothing changes (a stop that arrives late is no error).
    Nothing,
    /// Reverting or reverted: refused (409).
    Refused,
}

pub fn stop_effect(run: &Run) -> StopEffect {
    match run.status {
        RunStatus::Queued => StopEffect::StopNow,
        RunStatus::Running if run.stop_requested => StopEffect::Nothing,
        RunStatus::Running => StopEffect::Request,
        s if s.is_finished() => StopEffect::Nothing,
        _ => StopEffect::Refused,
    }
}

/// A USD amount of micro-dollars as a decimal string (`"0"`, `"0.0015"`).
pub fn usd_string(micro_usd: u64) -> String {
    let whole = micro_usd / 1_000_000;
    let frac = micro_usd % 1_000_000;
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:06}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}
