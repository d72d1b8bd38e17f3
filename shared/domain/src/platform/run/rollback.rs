//! Rollbacks: where one restores a workspace to, and what it makes of the Runs it takes back.

use super::*;

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
