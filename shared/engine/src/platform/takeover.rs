//! Runs whose executor died: taken over once their lease lapsed ([`take_over`], by a redelivery,
//! the outbox sweep or a stop's [`nudge`]) and settled once, never run again.

use std::time::Duration;

use agentplane_domain::platform::Environment;
use agentplane_domain::platform::run::{ExecuteRun, Run, RunError, RunStatus};
use tokio::time::Instant;

use super::end::{End, Executed, finish};
use super::{Platform, checkpoint, lease, workspace};
use crate::ports::platform::PlatformStore;
use crate::ports::queues::RunsMessage;
use crate::ports::{Compute, PortError};

/// Settles a Run whose executor died once its lease has expired: the workspace as it was left
/// is checkpointed (so the diff is known) and the Run fails with [`lease::EXECUTOR_LOST`] (or
/// ends `stopped` when a stop was asked for). It is not run again: that would repeat model
/// spend and external side effects.
pub(super) async fn take_over<S: PlatformStore, C: Compute>(
    platform: &Platform<'_, S, C>,
    environment: &Environment,
    run: Run,
) -> Result<Executed, PortError> {
    let store = platform.store;
    let Some(held) = lease::take_over(store, environment, &run, platform.lease).await? else {
        return Ok(Executed::Stale);
    };
    tracing::warn!(run = %run.id, "taking over a Run whose executor stopped renewing its lease");
    let before = match &run.start_manifest {
        Some(id) => checkpoint::load(store, id).await.ok(),
        None => None,
    };
    let sandbox = match &before {
        Some(_) => workspace::sandbox(platform, environment).await.ok(),
        None => None,
    };
    let end = if run.stop_requested {
        End::stopped()
    } else {
        End::failed(RunError {
            code: lease::EXECUTOR_LOST.into(),
            message: "the Run's executor stopped while it ran; the Run was not resumed".into(),
        })
    };
    let ran_for = run
        .started_at
        .map(|at| {
            Duration::from_millis(u64::try_from(crate::now().unix_millis() - at.unix_millis()).unwrap_or(0))
        })
        .unwrap_or_default();
    let started = Instant::now().checked_sub(ran_for).unwrap_or_else(Instant::now);
    // Its turn died with it: the session's next turn need not wait for that turn's hold.
    store.settle_turn_of(&run.project_id, &run.session_id, run.turn_id().as_str(), crate::now()).await?;
    let workspace = sandbox.as_ref().zip(before.as_ref());
    let executed = finish(store, run, end, started, workspace).await;
    lease::release(store, &environment.project_id, &environment.id, &held).await;
    executed
}

/// Sends `run`'s message now when no live lease holds its environment for it: a Run left
/// `running` by an executor that died is then taken over (and settled) by that delivery rather
/// than by a redelivery that may be minutes away. A live executor is left alone.
pub async fn nudge<S: PlatformStore>(store: &S, run: &Run) -> Result<bool, PortError> {
    if run.status != RunStatus::Running {
        return Ok(false);
    }
    let env = match store.environment(&run.project_id, &run.environment_id).await {
        Ok(env) => env,
        Err(PortError::NotFound) => return Ok(false),
        Err(err) => return Err(err),
    };
    let now = crate::now();
    if env.executing.as_ref().is_some_and(|l| l.live(now) && l.run_id == run.id) {
        return Ok(false);
    }
    let message = ExecuteRun { project_id: run.project_id, run_id: run.id };
    store.send_run(&RunsMessage::PlatformRun(message), 0).await?;
    Ok(true)
}
