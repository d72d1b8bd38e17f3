//! The outbox of Platform work: every state change that needs a queue message (a Run created,
//! a rollback accepted) puts its environment in the due-work index in the same write, and the
//! message is sent after the commit. When that send fails, or the message is lost (dropped, or
//! moved to the dead-letter queue), or the executor holding a Run dies, this pass — part of the
//! retention sweep — acts on what the environment's state says is still owed:
//!
//! - a rollback under way is sent its message again, or given up once it is older than the
//!   platform allows ([`super::rollback::give_up`]);
//! - a Run `running` that no live lease holds is sent again (its delivery takes it over and
//!   settles it, or carries on one waiting for a node);
//! - the first Run `queued` while no live lease holds the workspace is sent again.
//!
//! Each message is idempotent on the consumer's side (a Run is claimed by a conditional write, a
//! rollback restores once), so sending one twice costs a read. An environment whose Runs have all
//! ended and which has no rollback under way leaves the outbox; otherwise it is looked at again a
//! grace period later (the store's, the one a state change's due time is set with).

use std::time::Duration;

use agentplane_domain::Timestamp;
use agentplane_domain::platform::Environment;
use agentplane_domain::platform::run::{ExecuteRun, RunStatus};

use crate::ports::PortError;
use crate::ports::platform::PlatformStore;
use crate::ports::queues::RunsMessage;

/// How many environments one pass looks at.
const PAGE: usize = 100;

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OutboxReport {
    /// Run messages sent again.
    pub runs_sent: usize,
    /// Rollback messages sent again.
    pub rollbacks_sent: usize,
    /// Rollbacks given up (overdue).
    pub rollbacks_given_up: usize,
    /// Environments whose work had all ended (out of the outbox).
    pub settled: usize,
    /// Environments that could not be looked at (looked at again next pass).
    pub failed: usize,
}

/// One pass over the environments whose outbox is due at `now`; `give_up` is how long a
/// rollback may take before it is given up.
pub async fn sweep_outbox<S: PlatformStore>(
    store: &S,
    now: Timestamp,
    give_up: Duration,
) -> Result<OutboxReport, PortError> {
    let mut report = OutboxReport::default();
    for due in store.outbox_due(now, PAGE).await? {
        if let Err(err) = Box::pin(visit(store, &due, now, give_up, &mut report)).await {
            tracing::warn!(error = %err, environment = %due.id, "the outbox of an environment could not be swept");
            report.failed += 1;
        }
    }
    Ok(report)
}

async fn visit<S: PlatformStore>(
    store: &S,
    due: &Environment,
    now: Timestamp,
    give_up: Duration,
    report: &mut OutboxReport,
) -> Result<(), PortError> {
    let env = match store.environment(&due.project_id, &due.id).await {
        Ok(env) => env,
        // Deleted: its purge owns it now (the purge's own index replaced the outbox keys).
        Err(PortError::NotFound) => return Ok(()),
        Err(err) => return Err(err),
    };
    if let Some(active) = &env.rollback {
        if super::rollback::overdue(active, give_up, now) {
            super::rollback::give_up(store, &env, active).await?;
            report.rollbacks_given_up += 1;
        } else {
            super::rollback::send(store, &env.project_id, &env.id, active).await;
            report.rollbacks_sent += 1;
        }
        return store.reschedule_outbox(&env, now).await;
    }
    let from = env.settled_through + 1;
    if from > env.run_count {
        report.settled += 1;
        return store.clear_outbox(&env).await;
    }
    let listed = store.runs_in_order(&env.id, from, env.run_count).await?;
    if u64::try_from(listed.len()).unwrap_or(0) < env.run_count - from + 1 {
        // The index has not caught up with a Run just created: look again later.
        return store.reschedule_outbox(&env, now).await;
    }
    let live = env.executing.as_ref().filter(|lease| lease.live(now));
    let mut open = false;
    let mut first_queued = true;
    for listed in listed.iter().filter(|r| !r.status.is_finished() && r.status != RunStatus::Reverted) {
        // The index names it; its state is read strongly.
        let run = match store.run(&env.project_id, &listed.id).await {
            Ok(run) => run,
            Err(PortError::NotFound) => continue,
            Err(err) => return Err(err),
        };
        let send = match run.status {
            RunStatus::Running => {
                open = true;
                live.is_none_or(|lease| lease.run_id != run.id)
            }
            RunStatus::Queued => {
                open = true;
                let send = first_queued && live.is_none();
                first_queued = false;
                send
            }
            RunStatus::Reverting => {
                open = true;
                false
            }
            _ => false,
        };
        if send {
            let message = ExecuteRun { project_id: run.project_id, run_id: run.id };
            store.send_run(&RunsMessage::PlatformRun(message), 0).await?;
            report.runs_sent += 1;
        }
    }
    if open {
        store.reschedule_outbox(&env, now).await
    } else {
        report.settled += 1;
        store.clear_outbox(&env).await
    }
}
