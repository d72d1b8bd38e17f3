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

/// What a client asks for: `{model, input, files?, steeringEnabled?}`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    pub model: String,
    pub input: String,
    pub files: Vec<RunFile>,
    pub steering_enabled: bool,
}

fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl NewRun {
    pub fn new(
        model: &str,
        input: &str,
        files: Vec<(String, Option<String>)>,
        steering_enabled: bool,
    ) -> Result<Self, ValidationError> {
        let chars = model.chars().count();
        if chars == 0 || chars > MAX_MODEL_CHARS || model.chars().any(char::is_control) {
            return Err(ValidationError::new(
                "model",
                format!("`model` must be 1 to {MAX_MODEL_CHARS} characters without control characters"),
            ));
        }
        if input.trim().is_empty() || input.chars().count() > MAX_INPUT_CHARS {
            return Err(ValidationError::new(
                "input",
                format!("`input` must be non-blank text of at most {MAX_INPUT_CHARS} characters"),
            ));
        }
        if files.len() > MAX_FILES {
            return Err(ValidationError::new("files", format!("`files` may name at most {MAX_FILES} files")));
        }
        let mut checked = Vec::with_capacity(files.len());
        for (n, (path, sha256)) in files.into_iter().enumerate() {
            let parsed = WorkspacePath::parse(&path).map_err(|err| {
                ValidationError::new(format!("files[{n}].path"), format!("`files[{n}].path`: {err}"))
            })?;
            if let Some(sha) = &sha256
                && !is_sha256(sha)
            {
                return Err(ValidationError::new(
                    format!("files[{n}].sha256"),
                    format!("`files[{n}].sha256` must be 64 lowercase hexadecimal digits"),
                ));
            }
            checked.push(RunFile { path: parsed.absolute(), sha256 });
        }
        Ok(Self { model: model.to_owned(), input: input.to_owned(), files: checked, steering_enabled })
    }

    pub fn into_run(
        self,
        id: RunId,
        project_id: ProjectId,
        environment_id: EnvironmentId,
        session_id: SessionId,
        environment_sequence: u64,
        now: Timestamp,
    ) -> Run {
        Run {
            id,
            project_id,
            environment_id,
            session_id,
            environment_sequence,
            model: self.model,
            input: self.input,
            files: self.files,
            status: RunStatus::Queued,
            stop_requested: false,
            steering_enabled: self.steering_enabled,
            output: None,
            error: None,
            file_diff: Vec::new(),
            file_diff_status: DiffStatus::Pending,
            file_diff_error: None,
            checkpoint: Checkpoint { status: CheckpointStatus::Pending, snapshot_id: None, error: None },
            created_at: now,
            started_at: None,
            finished_at: None,
            content_deleted_at: None,
            start_manifest: None,
            sandbox_runtime_ms: 0,
            sandbox_usd_per_second: None,
            reverted_from: None,
            version: 0,
        }
    }
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

/// The `rollbacks` queue message (`{"kind": "rollback", …}`) of an accepted rollback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollbackMessage {
    pub project_id: ProjectId,
    pub environment_id: EnvironmentId,
    pub run_id: RunId,
}

/// Where a rollback of a Run restores the workspace to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestorePoint {
    /// The checkpoint (manifest id) just before the Run.
    Manifest(String),
    /// No Run before it ever touched the workspace and there is no initial checkpoint: no Run
    /// has run at all, so there is nothing to restore.
    Nothing,
    /// The checkpoint just before the Run is not usable (pending or failed): refused (409).
    Unavailable { run_id: RunId, status: CheckpointStatus },
}

/// The restore point of a rollback of `selected`: the checkpoint immediately before it. That is
/// its own start checkpoint when it has one (so files written through the API between the Run
/// before it and it survive). Otherwise (it never reached its workspace) the nearest earlier
/// ready checkpoint: `earlier` are the Runs before it, nearest first. Runs that never touched
/// the workspace (queued, or a checkpoint `skipped`) and Runs already reverted are passed over;
/// an earlier Run whose end checkpoint is pending or failed is skipped for its start checkpoint
/// (as the spec says, "pending or failed checkpoints are skipped"); `initial` is the
/// environment's initial checkpoint. Only a Run still running refuses it: the state before the
/// selected Run is not known until that Run ends.
pub fn restore_point<'a>(
    selected: &Run,
    earlier: impl IntoIterator<Item = &'a Run>,
    initial: Option<&str>,
) -> RestorePoint {
    if let Some(start) = &selected.start_manifest {
        return RestorePoint::Manifest(start.clone());
    }
    for run in earlier {
        match run.status {
            RunStatus::Queued | RunStatus::Reverting | RunStatus::Reverted => continue,
            RunStatus::Running => {
                return RestorePoint::Unavailable { run_id: run.id, status: CheckpointStatus::Pending };
            }
            RunStatus::Completed | RunStatus::Failed | RunStatus::Stopped => {
                match (run.checkpoint.status, &run.checkpoint.snapshot_id, &run.start_manifest) {
                    (CheckpointStatus::Skipped, _, _) => continue,
                    (CheckpointStatus::Ready, Some(id), _) => return RestorePoint::Manifest(id.clone()),
                    (_, _, Some(start)) => return RestorePoint::Manifest(start.clone()),
                    _ => continue,
                }
            }
        }
    }
    match initial {
        Some(id) => RestorePoint::Manifest(id.to_owned()),
        None => RestorePoint::Nothing,
    }
}

/// What a rollback makes of an affected Run at the end: `reverted`, its pending or failed
/// checkpoint `skipped` (a ready one stays: the audit keeps it).
pub fn revert(run: &mut Run) {
    run.status = RunStatus::Reverted;
    if matches!(run.checkpoint.status, CheckpointStatus::Pending | CheckpointStatus::Failed) {
        run.checkpoint.status = CheckpointStatus::Skipped;
    }
    if run.file_diff_status == DiffStatus::Pending {
        run.file_diff_status = DiffStatus::Ready;
    }
}

/// The manifest a workspace last had as far as its checkpoints know, from its Runs newest first
/// (what a replacement sandbox is restored to): the newest Run not rolled back gives its ready
/// end checkpoint, else its start; a block of rolled-back Runs gives the start of its oldest
/// (what the rollback restored) when it has one. `None`: nothing in these Runs says — read
/// older ones, and at the end take the environment's initial checkpoint.
pub fn latest_manifest<'a>(newest_first: impl IntoIterator<Item = &'a Run>) -> Option<String> {
    let mut restored: Option<&str> = None;
    for run in newest_first {
        if run.status.is_reverted() {
            restored = run.start_manifest.as_deref();
            continue;
        }
        if let Some(manifest) = restored {
            return Some(manifest.to_owned());
        }
        if run.checkpoint.status == CheckpointStatus::Ready
            && let Some(snapshot) = &run.checkpoint.snapshot_id
        {
            return Some(snapshot.clone());
        }
        if let Some(manifest) = &run.start_manifest {
            return Some(manifest.clone());
        }
    }
    restored.map(str::to_owned)
}

/// The code of a Run whose rollback failed before its files were restored.
pub const ROLLBACK_FAILED: &str = "rollback_failed";

/// Marks `run` as taken by a rollback (`reverting`), remembering what it was.
pub fn begin_revert(run: &mut Run) {
    if !run.status.is_reverted() {
        run.reverted_from = Some(run.status);
        run.status = RunStatus::Reverting;
    }
}

/// A rollback that failed gives `run` back (its files were not restored, so it is not
/// `reverted`): a Run that had ended reads as it did; one that was queued or running when the
/// rollback stopped it ends `stopped` (its execution wrote no ending, so its diff is unknown).
pub fn unrevert(run: &mut Run, now: Timestamp) {
    if run.status != RunStatus::Reverting {
        return;
    }
    match run.reverted_from.take() {
        Some(status) if status.is_finished() => run.status = status,
        before => {
            let ran = before == Some(RunStatus::Running) || run.started_at.is_some();
            run.status = RunStatus::Stopped;
            run.stop_requested = true;
            run.finished_at.get_or_insert(now);
            if matches!(run.checkpoint.status, CheckpointStatus::Pending) {
                run.checkpoint.status =
                    if ran { CheckpointStatus::Failed } else { CheckpointStatus::Skipped };
            }
            if run.file_diff_status == DiffStatus::Pending {
                if ran {
                    run.file_diff_status = DiffStatus::Failed;
                    run.file_diff_error = Some(DIFF_UNKNOWN_AFTER_ROLLBACK.into());
                } else {
                    run.file_diff_status = DiffStatus::Ready;
                }
            }
        }
    }
}

/// The `fileDiffError` of a Run a failed rollback stopped while it ran.
pub const DIFF_UNKNOWN_AFTER_ROLLBACK: &str =
    "the Run was stopped by a rollback that then failed; its changes are unknown";

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

#[cfg(test)]
mod tests {
    use super::*;

    fn new(model: &str, input: &str, files: Vec<(&str, Option<&str>)>) -> Result<NewRun, ValidationError> {
        let files = files.into_iter().map(|(p, s)| (p.to_owned(), s.map(str::to_owned))).collect();
        NewRun::new(model, input, files, false)
    }

    #[test]
    fn requests_are_validated_naming_the_field() {
        assert!(new("gpt-test", "fix it", vec![("/workspace/a.rs", None)]).is_ok());
        assert_eq!(new("", "x", vec![]).unwrap_err().param.as_deref(), Some("model"));
        assert_eq!(new("m", "  ", vec![]).unwrap_err().param.as_deref(), Some("input"));
        assert_eq!(
            new("m", "x", vec![("/workspace/../a", None)]).unwrap_err().param.as_deref(),
            Some("files[0].path")
        );
        assert_eq!(
            new("m", "x", vec![("/workspace/a", None), ("/workspace/b", Some("ABC"))])
                .unwrap_err()
                .param
                .as_deref(),
            Some("files[1].sha256")
        );
        assert!(new("m", "x", vec![("/workspace/a", Some(&"a".repeat(64)))]).is_ok());
    }

    #[test]
    fn stop_depends_on_the_status() {
        let mut run = new("m", "x", vec![]).unwrap_or_else(|e| panic!("{e}")).into_run(
            RunId::from_random([1; 16]),
            ProjectId::from_random([2; 16]),
            EnvironmentId::from_random([3; 16]),
            SessionId::from_random([4; 16]),
            1,
            Timestamp::from_unix_millis(0),
        );
        assert_eq!(stop_effect(&run), StopEffect::StopNow);
        run.status = RunStatus::Running;
        assert_eq!(stop_effect(&run), StopEffect::Request);
        run.stop_requested = true;
        assert_eq!(stop_effect(&run), StopEffect::Nothing);
        run.status = RunStatus::Completed;
        assert_eq!(stop_effect(&run), StopEffect::Nothing);
        run.status = RunStatus::Reverted;
        assert_eq!(stop_effect(&run), StopEffect::Refused);
    }

    #[test]
    fn a_failed_rollback_gives_each_run_back() {
        let base = new("m", "x", vec![]).unwrap_or_else(|e| panic!("{e}")).into_run(
            RunId::from_random([1; 16]),
            ProjectId::from_random([2; 16]),
            EnvironmentId::from_random([3; 16]),
            SessionId::from_random([4; 16]),
            1,
            Timestamp::from_unix_millis(0),
        );
        let at = Timestamp::from_unix_millis(9);
        // An ended Run reads as it did.
        let mut done = base.clone();
        done.status = RunStatus::Completed;
        done.checkpoint.status = CheckpointStatus::Ready;
        done.file_diff_status = DiffStatus::Ready;
        begin_revert(&mut done);
        assert_eq!((done.status, done.reverted_from), (RunStatus::Reverting, Some(RunStatus::Completed)));
        begin_revert(&mut done);
        assert_eq!(done.reverted_from, Some(RunStatus::Completed), "a second mark keeps the first status");
        unrevert(&mut done, at);
        assert_eq!((done.status, done.checkpoint.status), (RunStatus::Completed, CheckpointStatus::Ready));
        assert_eq!(done.reverted_from, None);
        // A queued one never ran: stopped, nothing to diff.
        let mut queued = base.clone();
        begin_revert(&mut queued);
        unrevert(&mut queued, at);
        assert_eq!(queued.status, RunStatus::Stopped);
        assert_eq!(
            (queued.checkpoint.status, queued.file_diff_status),
            (CheckpointStatus::Skipped, DiffStatus::Ready)
        );
        assert_eq!(queued.finished_at, Some(at));
        // A running one: stopped, its diff unknown (never `ready` with nothing in it).
        let mut running = base;
        running.status = RunStatus::Running;
        running.started_at = Some(at);
        begin_revert(&mut running);
        unrevert(&mut running, at);
        assert_eq!(running.status, RunStatus::Stopped);
        assert_eq!(
            (running.checkpoint.status, running.file_diff_status),
            (CheckpointStatus::Failed, DiffStatus::Failed)
        );
        assert!(running.file_diff_error.is_some());
    }

    #[test]
    fn the_latest_manifest_skips_what_was_rolled_back() {
        let run = |status: RunStatus, start: Option<&str>, end: Option<&str>| {
            let mut run = new("m", "x", vec![]).unwrap_or_else(|e| panic!("{e}")).into_run(
                RunId::from_random([1; 16]),
                ProjectId::from_random([2; 16]),
                EnvironmentId::from_random([3; 16]),
                SessionId::from_random([4; 16]),
                1,
                Timestamp::from_unix_millis(0),
            );
            run.status = status;
            run.start_manifest = start.map(str::to_owned);
            if let Some(end) = end {
                run.checkpoint.status = CheckpointStatus::Ready;
                run.checkpoint.snapshot_id = Some(end.to_owned());
            }
            run
        };
        let done = run(RunStatus::Completed, Some("s1"), Some("e1"));
        assert_eq!(latest_manifest([&done]).as_deref(), Some("e1"));
        // A failed end checkpoint: its start is the best known.
        let failed_end = run(RunStatus::Completed, Some("s2"), None);
        assert_eq!(latest_manifest([&failed_end, &done]).as_deref(), Some("s2"));
        // A stopped Run that never started says nothing: the one before it does.
        let never = run(RunStatus::Stopped, None, None);
        assert_eq!(latest_manifest([&never, &done]).as_deref(), Some("e1"));
        // Rolled back: the start of the oldest Run of the block (what the rollback restored).
        let r3 = run(RunStatus::Reverted, Some("s3"), Some("e3"));
        let r4 = run(RunStatus::Reverted, Some("s4"), Some("e4"));
        assert_eq!(latest_manifest([&r4, &r3, &done]).as_deref(), Some("s3"));
        let unstarted = run(RunStatus::Reverted, None, None);
        assert_eq!(latest_manifest([&r4, &unstarted, &done]).as_deref(), Some("e1"));
        assert_eq!(latest_manifest([&r4, &r3]).as_deref(), Some("s3"));
        assert_eq!(latest_manifest([&never]), None);
    }

    #[test]
    fn endings_and_their_events() {
        use crate::session::StopReason as S;
        assert_eq!(ending(S::EndTurn, None), (RunStatus::Completed, None));
        assert_eq!(ending(S::Cancelled, None).0, RunStatus::Stopped);
        let (status, error) = ending(S::Error, Some(("model_error".into(), "boom".into())));
        assert_eq!((status, error.map(|e| e.code)), (RunStatus::Failed, Some("model_error".to_owned())));
        assert_eq!(ending(S::Limit, None).0, RunStatus::Failed);
        assert_eq!(RunStatus::Completed.event_type(), Some("run.completed"));
        assert_eq!(RunStatus::Stopped.event_type(), Some("run.stopped"));
        assert_eq!(RunStatus::Running.event_type(), None);
    }

    #[test]
    fn the_restore_point_is_the_nearest_earlier_checkpoint_that_counts() {
        let base = new("m", "x", vec![]).unwrap_or_else(|e| panic!("{e}")).into_run(
            RunId::from_random([1; 16]),
            ProjectId::from_random([2; 16]),
            EnvironmentId::from_random([3; 16]),
            SessionId::from_random([4; 16]),
            1,
            Timestamp::from_unix_millis(0),
        );
        let with = |status, checkpoint, snapshot: Option<&str>| {
            let mut run = base.clone();
            run.status = status;
            run.checkpoint.status = checkpoint;
            run.checkpoint.snapshot_id = snapshot.map(str::to_owned);
            run
        };
        let ready = with(RunStatus::Completed, CheckpointStatus::Ready, Some("m1"));
        let queued = with(RunStatus::Queued, CheckpointStatus::Pending, None);
        let skipped = with(RunStatus::Failed, CheckpointStatus::Skipped, None);
        let reverted = with(RunStatus::Reverted, CheckpointStatus::Ready, Some("old"));
        let failed = with(RunStatus::Completed, CheckpointStatus::Failed, None);
        let running = with(RunStatus::Running, CheckpointStatus::Pending, None);
        let selected = queued.clone();
        assert_eq!(
            restore_point(&selected, [&queued, &skipped, &reverted, &ready], Some("init")),
            RestorePoint::Manifest("m1".into())
        );
        assert_eq!(restore_point(&selected, [&queued], Some("init")), RestorePoint::Manifest("init".into()));
        assert_eq!(restore_point(&selected, [], None), RestorePoint::Nothing);
        // A failed end checkpoint is skipped: its start, else an earlier ready one.
        assert_eq!(restore_point(&selected, [&failed, &ready], None), RestorePoint::Manifest("m1".into()));
        let mut failed_with_start = failed.clone();
        failed_with_start.start_manifest = Some("s0".into());
        assert_eq!(
            restore_point(&selected, [&failed_with_start, &ready], None),
            RestorePoint::Manifest("s0".into())
        );
        assert!(matches!(
            restore_point(&selected, [&running], Some("init")),
            RestorePoint::Unavailable { status: CheckpointStatus::Pending, .. }
        ));
        // A selected Run that reached its workspace restores its own start, whatever came before.
        let mut started = with(RunStatus::Completed, CheckpointStatus::Ready, Some("after"));
        started.start_manifest = Some("before".into());
        assert_eq!(
            restore_point(&started, [&running, &ready], Some("init")),
            RestorePoint::Manifest("before".into())
        );
        let mut run = with(RunStatus::Reverting, CheckpointStatus::Failed, None);
        revert(&mut run);
        assert_eq!((run.status, run.checkpoint.status), (RunStatus::Reverted, CheckpointStatus::Skipped));
        let mut kept = with(RunStatus::Reverting, CheckpointStatus::Ready, Some("m"));
        revert(&mut kept);
        assert_eq!(kept.checkpoint.status, CheckpointStatus::Ready);
    }

    #[test]
    fn amounts_are_decimal_strings() {
        assert_eq!(usd_string(0), "0");
        assert_eq!(usd_string(1_500), "0.0015");
        assert_eq!(usd_string(2_000_000), "2");
        assert_eq!(usd_string(12_340_000), "12.34");
    }
}
