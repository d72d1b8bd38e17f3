//! A client's Runs: one is submitted `queued` with the environment's next sequence number and
//! sent for execution; one is stopped at once while queued, or asked to stop at its next safe
//! point while it runs.

use agentplane_domain::platform::Environment;
use agentplane_domain::platform::run::{
    self, CheckpointStatus, DiffStatus, ExecuteRun, NewRun, Run, RunId, RunStatus, StopEffect,
};
use agentplane_domain::platform::sandbox_price::SandboxPrice;
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_domain::{ProjectId, SessionId};

use super::end::run_event;
use super::takeover::nudge;
use crate::ports::PortError;
use crate::ports::platform::PlatformStore;
use crate::ports::queues::RunsMessage;

/// Attempts at taking the environment's next number before a submission gives up.
const SUBMIT_ATTEMPTS: u64 = 16;
/// Attempts at a stop over a Run that keeps changing.
const STOP_ATTEMPTS: usize = 8;

/// Why a Run was not submitted or stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    #[error("environment not found")]
    EnvironmentNotFound,
    #[error("run not found")]
    RunNotFound,
    /// The Run is reverting or reverted: it cannot be stopped.
    #[error("the run is reverted")]
    Reverted,
    /// Other writers won every attempt.
    #[error("too many concurrent changes")]
    ConcurrentUpdate,
    #[error("no randomness for an id")]
    Randomness,
    #[error(transparent)]
    Port(PortError),
}

/// Where a new Run goes and what it is charged.
pub struct Submission {
    pub project: ProjectId,
    pub environment: EnvironmentId,
    pub session: SessionId,
    pub new: NewRun,
    /// The price its sandbox time is charged at, whatever the price is later.
    pub sandbox_price: SandboxPrice,
}

async fn environment<S: PlatformStore>(
    store: &S,
    project: &ProjectId,
    id: &EnvironmentId,
) -> Result<Environment, RunsError> {
    match store.environment(project, id).await {
        Ok(environment) => Ok(environment),
        Err(PortError::NotFound) => Err(RunsError::EnvironmentNotFound),
        Err(err) => Err(RunsError::Port(err)),
    }
}

/// Creates the Run `queued`, numbered after the environment's last, and sends it for execution.
/// The create puts the environment in the outbox: a message that cannot be sent now is sent by
/// the sweep, so the Run exists and still runs.
pub async fn submit<S: PlatformStore>(store: &S, submission: Submission) -> Result<Run, RunsError> {
    let Submission { project, environment: environment_id, session, new, sandbox_price } = submission;
    let id = RunId::from_random(crate::random::secret().map_err(|_| RunsError::Randomness)?);
    for attempt in 0..SUBMIT_ATTEMPTS {
        let previous = environment(store, &project, &environment_id).await?.run_count;
        let mut run = new.clone().into_run(id, project, environment_id, session, previous + 1, crate::now());
        run.sandbox_usd_per_second = Some(sandbox_price);
        match store.create_run(&run, previous).await {
            Ok(()) => {
                let message = ExecuteRun { project_id: run.project_id, run_id: run.id };
                if let Err(err) = store.send_run(&RunsMessage::PlatformRun(message), 0).await {
                    tracing::error!(error = %err, run = %run.id, "could not queue a Run's execution; the outbox sweep sends it");
                }
                return Ok(run);
            }
            Err(PortError::Conflict) => {
                // Another Run took the number (or the session is gone): read again.
                let jitter = crate::random::secret::<1>().map_err(|_| RunsError::Randomness)?[0];
                let pause = 5 * attempt + u64::from(jitter) % 10;
                tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            }
            Err(err) => return Err(RunsError::Port(err)),
        }
    }
    Err(RunsError::ConcurrentUpdate)
}

/// Stops the Run as its status allows: a queued one at once (it never runs), a running one at
/// its next safe point (its turn cancelled, and a dead executor's Run taken over), a finished
/// one not at all; the Run as it is now.
pub async fn stop<S: PlatformStore>(store: &S, mut run: Run) -> Result<Run, RunsError> {
    for _ in 0..STOP_ATTEMPTS {
        let expected = run.version;
        let now = crate::now();
        match run::stop_effect(&run) {
            StopEffect::Nothing => return Ok(run),
            StopEffect::Refused => return Err(RunsError::Reverted),
            StopEffect::StopNow => {
                run.status = RunStatus::Stopped;
                run.stop_requested = true;
                run.finished_at = Some(now);
                // It never ran: nothing changed and nothing is checkpointed.
                run.file_diff_status = DiffStatus::Ready;
                run.checkpoint.status = CheckpointStatus::Skipped;
            }
            StopEffect::Request => run.stop_requested = true,
        }
        run.version = expected + 1;
        let events: Vec<_> = run_event(&run).into_iter().collect();
        match store.replace_run_emitting(&run, expected, &events).await {
            Ok(()) => {
                if let Err(err) = store.send_events(&events).await {
                    tracing::warn!(error = %err, "could not send a Run's webhook event");
                }
                if run.status == RunStatus::Running {
                    // The execution ends the turn at its next step (its watcher records the
                    // same cancel, should the turn not hold the session yet).
                    let holder = store.turn_holder(&run.project_id, &run.session_id).await;
                    if holder.is_ok_and(|h| h.turn_id.as_deref() == Some(run.turn_id().as_str())) {
                        let _ = store.cancel_turn(&run.project_id, &run.session_id, now).await;
                    }
                    // An executor that died holds no live lease: a delivery now takes the Run
                    // over and settles it `stopped`.
                    if let Err(err) = nudge(store, &run).await {
                        tracing::warn!(error = %err, run = %run.id, "could not send a stopped Run's message");
                    }
                }
                return Ok(run);
            }
            Err(PortError::Conflict) => {
                run = match store.run(&run.project_id, &run.id).await {
                    Ok(run) => run,
                    Err(PortError::NotFound) => return Err(RunsError::RunNotFound),
                    Err(err) => return Err(RunsError::Port(err)),
                };
            }
            Err(err) => return Err(RunsError::Port(err)),
        }
    }
    Err(RunsError::ConcurrentUpdate)
}
