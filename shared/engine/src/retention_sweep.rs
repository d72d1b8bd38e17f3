//! The retention sweep (the `retention-sweep` job, every minute): its first duty is answering
//! actions nobody answered in time. Each due pending action is settled `expired` (a conditional
//! write: an answer that got there first wins), and each turn left with no pending action is
//! carried on (a continuation on the `runs` queue); the model then sees "expired" as the
//! action's result. Deleting old data is later work for the same job.

use std::collections::BTreeSet;

use agentplane_domain::Timestamp;
use agentplane_domain::action::{Action, ActionStatus};
use agentplane_store::{Store, StoreError};

use crate::continuation::carry_on_if_settled;

/// How many due actions one read takes.
pub const PAGE: usize = 100;
/// How many reads one pass makes at most; what is left waits for the next pass.
pub const MAX_PAGES: usize = 10;

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Due pending actions read.
    pub due: usize,
    /// Actions this pass settled `expired`.
    pub expired: usize,
    /// Actions answered (or gone) before this pass could expire them.
    pub skipped: usize,
    /// Turns this pass carried on (a continuation sent).
    pub continued: usize,
    /// Storage failures (settling or carrying on); logged, and the pass goes on.
    pub failed: usize,
}

/// One pass over the actions due at `now`. A failed read of due actions is an `Err`; a failure
/// on one action is counted and the pass goes on with the next.
pub async fn sweep_once(store: &Store, now: Timestamp) -> Result<SweepReport, StoreError> {
    let mut report = SweepReport::default();
    for _ in 0..MAX_PAGES {
        let due = store.actions().due(now, PAGE).await?;
        report.due += due.len();
        let mut expired = Vec::new();
        for action in &due {
            match store.actions().settle(action, ActionStatus::Expired, None, now).await {
                Ok(settled) => expired.push(settled),
                // Answered, cancelled or deleted first: nothing left to expire.
                Err(StoreError::Conflict | StoreError::NotFound) => report.skipped += 1,
                Err(err) => {
                    tracing::warn!(action = %action.id, error = %err, "expiring an action failed");
                    report.failed += 1;
                }
            }
        }
        carry_on(store, &expired, &mut report).await;
        report.expired += expired.len();
        // A short page was the last; a page that expired nothing (already answered, or the
        // index lagging behind) would be read again as it is.
        if due.len() < PAGE || expired.is_empty() {
            break;
        }
    }
    Ok(report)
}

/// Carries on each turn of `expired` once, if none of its actions is pending any more.
async fn carry_on(store: &Store, expired: &[Action], report: &mut SweepReport) {
    let mut seen = BTreeSet::new();
    for action in expired {
        if !seen.insert((action.project_id, action.session_id, action.turn_id.clone())) {
            continue;
        }
        match carry_on_if_settled(store, action).await {
            Ok(true) => report.continued += 1,
            Ok(false) => {}
            Err(err) => {
                // The action is expired but its turn was not carried on: logged with what is
                // needed to send the continuation by hand.
                tracing::error!(
                    project = %action.project_id, session = %action.session_id, turn = %action.turn_id,
                    version = action.pause_version, error = %err,
                    "carrying a turn on after an expiry failed"
                );
                report.failed += 1;
            }
        }
    }
}
