//! One Run at a time per environment, in `environmentSequence` order.
//!
//! A Run executes under the environment's execution lease ([`ExecutionLease`]): claimed by a
//! conditional write only while no earlier Run of the environment is queued or running, no
//! rollback is under way and no other live lease holds the workspace; renewed while the Run
//! works ([`keep`]); given back at its end, which sends the next queued Run at once
//! ([`send_next`]). Stopped, failed, completed and reverted Runs do not hold the line.
//!
//! Every claim takes the environment's next fencing token. An executor that cannot renew (its
//! lease lapsed and another took it, or storage did not answer in time) is told it lost the
//! lease before the lease can be taken over: it stops touching the workspace and writes nothing
//! more of the Run (its writes are conditional on the Run's version, which the successor moves).
//! A Run whose executor died is taken over by the next delivery of its message once its lease
//! has expired, and fails with [`EXECUTOR_LOST`].

use std::time::Duration;

use agentplane_domain::Timestamp;
use agentplane_domain::platform::run::{ExecuteRun, Run, RunStatus};
use agentplane_domain::platform::{Environment, ExecutionLease};
use tokio::sync::watch;

use crate::ports::PortError;
use crate::ports::platform::{PlatformEnvironments, PlatformRuns, PlatformStore};
use crate::ports::queues::RunsMessage;

/// How long a lease holds without renewal: the longest a dead executor keeps its environment.
pub const LEASE: Duration = Duration::from_secs(60);
/// The code a Run taken over from a dead executor fails with.
pub const EXECUTOR_LOST: &str = "executor_lost";

/// Whether `run` may execute now, and if so the lease it executes under.
#[derive(Debug)]
pub enum Line {
    /// It holds the lease.
    Go(ExecutionLease),
    /// An earlier Run (or a live lease, or a rollback) holds the workspace.
    Wait,
}

fn later(now: Timestamp, by: Duration) -> Timestamp {
    now.plus_millis(i64::try_from(by.as_millis()).unwrap_or(i64::MAX))
}

/// Whether an earlier Run of the environment than `run` still holds the line (queued or
/// running), reading only the Runs after the environment's settled point. The index names
/// them; a Run it shows holding is read again strongly (statuses only move on).
async fn held_before<S: PlatformRuns>(store: &S, env: &Environment, run: &Run) -> Result<bool, PortError> {
    let from = env.settled_through + 1;
    let Some(through) = run.environment_sequence.checked_sub(1) else { return Ok(false) };
    if from > through {
        return Ok(false);
    }
    let earlier = store.runs_in_order(&env.id, from, through).await?;
    if u64::try_from(earlier.len()).unwrap_or(0) < through - from + 1 {
        // The index has not caught up with a Run created just before: wait for it.
        return Ok(true);
    }
    for candidate in earlier.iter().filter(|r| holds_line(r.status)) {
        match store.run(&run.project_id, &candidate.id).await {
            Ok(now) if holds_line(now.status) => return Ok(true),
            Ok(_) | Err(PortError::NotFound) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(false)
}

fn holds_line(status: RunStatus) -> bool {
    matches!(status, RunStatus::Queued | RunStatus::Running)
}

/// Claims the environment's lease for `run` when its turn has come (`env` as just read).
pub async fn acquire<S: PlatformStore>(
    store: &S,
    env: &Environment,
    run: &Run,
    lease: Duration,
) -> Result<Line, PortError> {
    let now = crate::now();
    if env.rollback.is_some() || env.executing.as_ref().is_some_and(|l| l.live(now)) {
        return Ok(Line::Wait);
    }
    if held_before(store, env, run).await? {
        return Ok(Line::Wait);
    }
    let settled = run.environment_sequence.saturating_sub(1);
    match store.claim_execution(env, &run.id, run.environment_sequence, settled, now, later(now, lease)).await
    {
        Ok(held) => Ok(Line::Go(held)),
        Err(PortError::Conflict) => Ok(Line::Wait),
        Err(err) => Err(err),
    }
}

/// Takes over the lease of `run` from an executor that died (its lease expired, or it never
/// held one: a Run left running by an earlier version). `None` while a live lease holds the
/// workspace.
pub async fn take_over<S: PlatformEnvironments>(
    store: &S,
    env: &Environment,
    run: &Run,
    lease: Duration,
) -> Result<Option<ExecutionLease>, PortError> {
    let now = crate::now();
    if env.executing.as_ref().is_some_and(|l| l.live(now)) {
        return Ok(None);
    }
    match store
        .claim_execution(env, &run.id, run.environment_sequence, env.settled_through, now, later(now, lease))
        .await
    {
        Ok(held) => Ok(Some(held)),
        Err(PortError::Conflict) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Renews `held` every third of `lease` until dropped. When a renewal is refused (the lease was
/// taken) or none succeeded for two thirds of `lease` (storage did not answer; the lease may be
/// about to lapse), `lost` turns true and stays so: the executor must stop touching the
/// workspace.
pub async fn keep<S: PlatformEnvironments>(
    store: S,
    held: ExecutionLease,
    project: agentplane_domain::ProjectId,
    env: agentplane_domain::telemetry::EnvironmentId,
    lease: Duration,
    lost: watch::Sender<bool>,
) {
    let every = lease / 3;
    let mut renewed = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(every).await;
        let until = later(crate::now(), lease);
        match store.renew_execution(&project, &env, &held, until).await {
            Ok(()) => renewed = tokio::time::Instant::now(),
            Err(PortError::Conflict) => {
                tracing::warn!(run = %held.run_id, "a Run's execution lease was lost");
                let _ = lost.send(true);
                return;
            }
            Err(err) => {
                tracing::warn!(error = %err, run = %held.run_id, "renewing a Run's execution lease failed")
            }
        }
        if renewed.elapsed() > every * 2 {
            tracing::warn!(run = %held.run_id, "a Run's execution lease could not be renewed in time");
            let _ = lost.send(true);
            return;
        }
    }
}

/// Gives the lease back and sends the environment's next queued Run (the one after `held`'s).
pub async fn release<S: PlatformStore>(
    store: &S,
    project: &agentplane_domain::ProjectId,
    env: &agentplane_domain::telemetry::EnvironmentId,
    held: &ExecutionLease,
) {
    if let Err(err) = store.release_execution(project, env, held).await {
        tracing::warn!(error = %err, run = %held.run_id, "giving back a Run's execution lease failed");
    }
    send_next(store, project, env, held.sequence).await;
}

/// Sends the message of the first queued Run after `after` (its predecessor ended, or a
/// rollback did): it starts now rather than when its own retry comes.
pub async fn send_next<S: PlatformStore>(
    store: &S,
    project: &agentplane_domain::ProjectId,
    env: &agentplane_domain::telemetry::EnvironmentId,
    after: u64,
) {
    let next = async {
        let count = store.environment(project, env).await?.run_count;
        if count <= after {
            return Ok::<_, PortError>(());
        }
        let runs = store.runs_in_order(env, after + 1, count).await?;
        if let Some(next) = runs.iter().find(|r| r.status == RunStatus::Queued) {
            let message = ExecuteRun { project_id: *project, run_id: next.id };
            store.send_run(&RunsMessage::PlatformRun(message), 0).await?;
        }
        Ok(())
    };
    if let Err(err) = next.await {
        tracing::warn!(error = %err, environment = %env, "could not send an environment's next Run");
    }
}
