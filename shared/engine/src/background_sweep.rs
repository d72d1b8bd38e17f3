//! Background runs whose executor died: the retention sweep's step that settles them, so that a
//! run is never left `running`.
//!
//! A running run holds a lease (`lease_until`), renewed with its tenant slot while the executor
//! works (every 40 s, for 2 min: `SLOT_LEASE_MS`). A crashed or timed-out invocation stops
//! renewing, and once the lease lapsed the run is found in the due-work index and settled by
//! one conditional write (still `running`, lease still lapsed, so a live executor that renewed
//! meanwhile keeps its run): `failed` with [`EXECUTOR_LOST`], or `canceled` when a cancel was
//! asked for meanwhile (nothing is left to stop). It is not run again: the turn may have made
//! model calls and tool calls already, and running it again would repeat that spend and those
//! side effects. The end is announced as any run's is (the `agent_run.*` event and the callback,
//! written with it), and the session the dead turn held is released at once (idle, `error`).
//!
//! Runs that never started need nothing here: the message that starts a run is sent when it is
//! created (a failed send fails the run there), and a run that waits for a slot sends itself
//! again, its delivery retried by the queue when that send fails.

use agentplane_domain::Timestamp;
use agentplane_domain::agent_run::{AgentRun, RunError, RunStatus};

use crate::background::Ending;
use crate::ports::PortError;
use crate::ports::background::{LapsedRuns, RunOutcome};
use crate::sweep_limits::{MAX_PAGES, PAGE};

/// The code a background run whose executor died fails with (as a Platform Run's does).
pub const EXECUTOR_LOST: &str = "executor_lost";

/// What one pass did with lapsed runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeadRuns {
    /// Runs settled `failed` (`executor_lost`).
    pub failed: usize,
    /// Runs settled `canceled`: a cancel was waiting for the dead executor.
    pub canceled: usize,
    /// Runs found lapsed that were renewed or ended meanwhile.
    pub skipped: usize,
    /// Storage failures on one run (logged; the pass goes on).
    pub errors: usize,
}

/// How a lapsed run ends: canceled if that was asked, else failed; what it used is kept.
pub fn dead_run_outcome(run: &AgentRun) -> RunOutcome {
    let (status, error) = if run.cancel_requested {
        (RunStatus::Canceled, None)
    } else {
        let error = RunError {
            code: EXECUTOR_LOST.to_owned(),
            message: "the run's executor stopped while it ran; the run was not run again".to_owned(),
        };
        (RunStatus::Failed, Some(error))
    };
    RunOutcome {
        status,
        stop_reason: None,
        output_text: None,
        error,
        usage: run.usage,
        cost_usd: run.cost_usd,
        pending_action_ids: Vec::new(),
        callback: None,
    }
}

/// Settles every running run whose lease lapsed at `now` (at most `MAX_PAGES` pages; the rest
/// waits for the next pass). A failed read of a page is an `Err`.
pub async fn settle_dead_runs<S: LapsedRuns>(store: &S, now: Timestamp) -> Result<DeadRuns, PortError> {
    let mut report = DeadRuns::default();
    for _ in 0..MAX_PAGES {
        let lapsed = store.lapsed_runs(now, PAGE).await?;
        let before = report.failed + report.canceled;
        for run in &lapsed {
            settle_one(store, run, now, &mut report).await;
        }
        // A short page was the last; a page that settled nothing would be read again as it is.
        if lapsed.len() < PAGE || report.failed + report.canceled == before {
            break;
        }
    }
    Ok(report)
}

async fn settle_one<S: LapsedRuns>(store: &S, run: &AgentRun, now: Timestamp, report: &mut DeadRuns) {
    if run.status != RunStatus::Running || run.lease_until.is_none_or(|until| until >= now) {
        report.skipped += 1;
        return;
    }
    let ending = Ending::of(run, dead_run_outcome(run));
    match store.settle_lapsed_run(run, &ending.outcome, ending.announce(), now).await {
        Ok(settled) => {
            tracing::warn!(run = %run.id, status = settled.status.as_str(), "settled a background run whose executor died");
            if settled.status == RunStatus::Canceled {
                report.canceled += 1;
            } else {
                report.failed += 1;
            }
            // Its turn died with it: the session's next turn need not wait for that turn's hold.
            let released =
                store.release_dead_turn(&run.project_id, &run.session_id, &run.id.turn_id(), now).await;
            if let Err(err) = released {
                tracing::warn!(run = %run.id, error = %err, "could not release the dead run's session");
                report.errors += 1;
            }
            ending.send(store).await;
        }
        // Renewed, ended or deleted meanwhile.
        Err(PortError::Conflict | PortError::NotFound) => report.skipped += 1,
        Err(err) => {
            tracing::warn!(run = %run.id, error = %err, "settling a background run whose executor died failed");
            report.errors += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use agentplane_domain::agent::Channel;
    use agentplane_domain::agent_run::RunId;
    use agentplane_domain::ids::AgentId;
    use agentplane_domain::{ProjectId, SessionId};

    use super::*;

    fn run(cancel_requested: bool) -> AgentRun {
        serde_json::from_value::<AgentRun>(serde_json::json!({
            "id": RunId::from_random([1; 12]),
            "project_id": ProjectId::from_random([1; 16]),
            "session_id": SessionId::from_random([2; 16]),
            "agent_id": AgentId::from_random([3; 16]),
            "channel": Channel::Draft,
            "status": "running",
            "input": "hi",
            "max_duration_ms": 60_000,
            "created_at": Timestamp::from_unix_seconds(100),
            "started_at": Timestamp::from_unix_seconds(101),
            "cost_usd": 0.25,
            "cancel_requested": cancel_requested,
            "expires_at": Timestamp::from_unix_seconds(200),
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_dead_run_fails_with_executor_lost_unless_a_cancel_waited() {
        // A run stored before leases reads with none.
        assert_eq!(run(false).lease_until, None);
        let failed = dead_run_outcome(&run(false));
        assert_eq!(failed.status, RunStatus::Failed);
        assert_eq!(failed.error.map(|e| e.code).as_deref(), Some(EXECUTOR_LOST));
        assert!((failed.cost_usd - 0.25).abs() < f64::EPSILON, "what it spent is kept");
        let canceled = dead_run_outcome(&run(true));
        assert_eq!((canceled.status, canceled.error), (RunStatus::Canceled, None));
    }
}
