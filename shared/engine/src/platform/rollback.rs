//! Rollback: accepting one (`DELETE /v1/environments/{e}/sessions/{s}/runs/{r}`, [`accept`]) and
//! the `rollback-restore` job ([`restore`]).
//!
//! Accepting picks the restore point ([`run::restore_point`]: the selected Run's own start
//! checkpoint, else the nearest earlier ready one; only an earlier Run still running refuses the
//! rollback with 409 `checkpoint_unavailable`), then freezes the affected set in one conditional write on the environment: the
//! selected Run's `environmentSequence` through the environment's `run_count` as it read it (the
//! write holds only while no Run was created meanwhile and no rollback is under way). The
//! selected Run turns `reverting` and the message goes on the `rollbacks` queue.
//!
//! The job stops the affected Runs that run (their executions end at their next step and write
//! no ending) and waits until no execution holds the environment's lease, restores the files (presigned GETs; files not in the manifest removed), restores
//! each affected session's transcript to what it was before its earliest affected Run, marks
//! every affected Run `reverted` (pending or failed checkpoints `skipped`, usage kept) with its
//! `run.reverted` event, and ends the rollback. A second delivery finds the rollback ended and
//! does nothing. While it runs, new Runs wait queued and workspace writes answer 409
//! `rollback_in_progress`.

use std::collections::BTreeMap;
use std::time::Duration;

use agentplane_domain::ProjectId;
use agentplane_domain::platform::ActiveRollback;
use agentplane_domain::platform::run::CheckpointStatus;
use agentplane_domain::platform::run::{self, RestorePoint, RollbackMessage, Run, RunStatus};
use agentplane_domain::telemetry::EnvironmentId;
use serde::{Deserialize, Serialize};

use super::{Platform, WorkspaceError, checkpoint, workspace};
use crate::ports::blobs::Blobs;
use crate::ports::platform::{PlatformEnvironments, PlatformRuns, PlatformStore, RunSessions};
use crate::ports::queues::Queues;
use crate::ports::{Compute, OutboxEvent, PortError};

/// How long a rollback's restore is retried before the rollback is given up (15 minutes).
pub const ROLLBACK_GIVE_UP: Duration = Duration::from_secs(15 * 60);

/// Whether a rollback holds the environment (new Runs wait, workspace writes are refused).
pub async fn in_progress<S: PlatformEnvironments>(
    store: &S,
    project: &ProjectId,
    environment: &EnvironmentId,
) -> Result<bool, PortError> {
    match store.environment(project, environment).await {
        Ok(found) => Ok(found.rollback.is_some()),
        Err(PortError::NotFound) => Ok(false),
        Err(err) => Err(err),
    }
}

/// How long a file operation waits for a rollback under way before it answers 409
/// `rollback_in_progress`.
pub const FILE_WAIT: Duration = Duration::from_secs(10);

/// `env` once no rollback holds it (read again every 200 ms), or `None` when one still does
/// after `bound`: file operations wait for a rollback rather than race its restore.
pub async fn after_rollback<S: PlatformEnvironments>(
    store: &S,
    env: agentplane_domain::platform::Environment,
    bound: Duration,
) -> Result<Option<agentplane_domain::platform::Environment>, PortError> {
    let deadline = tokio::time::Instant::now() + bound;
    let mut env = env;
    while env.rollback.is_some() {
        if tokio::time::Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        env = store.environment(&env.project_id, &env.id).await?;
    }
    Ok(Some(env))
}

/// A session's transcript before a Run, as the execution saved it (the workspaces bucket,
/// `runs/<run>/transcript.json`).
#[derive(Debug, Serialize, Deserialize)]
pub struct TranscriptBefore {
    pub body: Option<String>,
}

pub fn transcript_key(run: &Run) -> String {
    format!("runs/{}/transcript.json", run.id)
}

/// The restore point of a rollback of `selected` (the Runs before it, read strongly).
async fn restore_point<S: PlatformRuns>(
    store: &S,
    selected: &Run,
    initial: Option<&str>,
) -> Result<RestorePoint, PortError> {
    if selected.start_manifest.is_some() {
        return Ok(run::restore_point(selected, [], initial));
    }
    let mut sequence = selected.environment_sequence;
    let mut earlier = Vec::new();
    while sequence > 1 {
        let from = sequence.saturating_sub(20).max(1);
        let ids = store.run_ids_in_order(&selected.environment_id, from, sequence - 1).await?;
        for id in ids.iter().rev() {
            earlier.push(store.run(&selected.project_id, id).await?);
        }
        let point = run::restore_point(selected, earlier.iter(), None);
        if point != RestorePoint::Nothing {
            return Ok(point);
        }
        sequence = from;
    }
    Ok(run::restore_point(selected, earlier.iter(), initial))
}

/// Moves `run` to `reverting` (asking a running one to stop, and cancelling its turn).
async fn mark_reverting<S: PlatformStore>(store: &S, mut run: Run) -> Result<Run, PortError> {
    for _ in 0..8 {
        if run.status.is_reverted() {
            return Ok(run);
        }
        let expected = run.version;
        let was_running = run.status == RunStatus::Running;
        let mut next = run.clone();
        run::begin_revert(&mut next);
        if was_running {
            next.stop_requested = true;
        }
        next.version = expected + 1;
        match store.replace_run(&next, expected).await {
            Ok(()) => {
                if was_running {
                    cancel_turn(store, &next).await;
                }
                return Ok(next);
            }
            Err(PortError::Conflict) => run = store.run(&run.project_id, &run.id).await?,
            Err(err) => return Err(err),
        }
    }
    Err(PortError::Conflict)
}

async fn cancel_turn<S: RunSessions>(store: &S, run: &Run) {
    let holder = store.turn_holder(&run.project_id, &run.session_id).await;
    if holder.is_ok_and(|h| h.turn_id.as_deref() == Some(run.turn_id().as_str())) {
        let _ = store.cancel_turn(&run.project_id, &run.session_id, crate::now()).await;
    }
}

/// Why a rollback was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("environment not found")]
    EnvironmentNotFound,
    /// Another rollback of the environment is under way.
    #[error("a rollback of the environment is under way")]
    InProgress,
    /// No checkpoint before the Run is ready.
    #[error("the checkpoint before the Run is not usable")]
    CheckpointUnavailable { run_id: String, status: CheckpointStatus },
    /// Changed concurrently past the retries.
    #[error("changed concurrently")]
    Conflict,
    #[error(transparent)]
    Storage(#[from] PortError),
}

/// Accepts a rollback of `run` and every later Run of its environment: the Run as it now reads
/// (`reverting`; or already reverting or reverted, which changes nothing).
pub async fn accept<S: PlatformStore>(store: &S, mut run: Run) -> Result<Run, Refused> {
    let project = run.project_id;
    for _ in 0..8 {
        let env = match store.environment(&project, &run.environment_id).await {
            Ok(env) => env,
            Err(PortError::NotFound) => return Err(Refused::EnvironmentNotFound),
            Err(err) => return Err(err.into()),
        };
        if run.status.is_reverted() {
            // Reverting or reverted already: retrying changes nothing, but a retry while its
            // rollback is under way sends the job's message again (the first may never have
            // been sent; the job does a rollback once however often it is told).
            if let Some(active) = env.rollback.as_ref().filter(|a| a.run_id == run.id) {
                send(store, &project, &run.environment_id, active).await;
            }
            return Ok(run);
        }
        if let Some(active) = &env.rollback {
            if (active.from_sequence..=active.through_sequence).contains(&run.environment_sequence) {
                // Part of the rollback under way: it is being reverted.
                return Ok(store.run(&project, &run.id).await?);
            }
            return Err(Refused::InProgress);
        }
        let manifest = match restore_point(store, &run, env.initial_checkpoint.as_deref()).await? {
            RestorePoint::Manifest(id) => Some(id),
            RestorePoint::Nothing => None,
            RestorePoint::Unavailable { run_id, status } => {
                return Err(Refused::CheckpointUnavailable { run_id: run_id.to_string(), status });
            }
        };
        let active = ActiveRollback {
            run_id: run.id,
            from_sequence: run.environment_sequence,
            through_sequence: env.run_count,
            manifest,
            accepted_at: crate::now(),
        };
        match store.begin_rollback(&project, &run.environment_id, &active).await {
            Ok(()) => {
                // Accepted: the environment records it (the outbox the sweep reads), so a message
                // that cannot be sent now is sent by the sweep.
                let run = mark_reverting(store, run).await?;
                send(store, &project, &run.environment_id, &active).await;
                return Ok(run);
            }
            // A Run was created or another rollback began meanwhile: read again.
            Err(PortError::Conflict) => run = store.run(&project, &run.id).await?,
            Err(err) => return Err(err.into()),
        }
    }
    Err(Refused::Conflict)
}

/// Sends the `rollback-restore` job its message for `active` (logged when it cannot be sent:
/// the outbox sweep sends it later).
pub async fn send<S: Queues>(
    store: &S,
    project: &ProjectId,
    environment: &EnvironmentId,
    active: &ActiveRollback,
) {
    let message =
        RollbackMessage { project_id: *project, environment_id: *environment, run_id: active.run_id };
    let sent = store.send_rollback(&Envelope::Rollback(message)).await;
    if let Err(err) = sent {
        tracing::warn!(error = %err, run = %active.run_id, "could not send a rollback's message; the sweep sends it");
    }
}

/// A `rollbacks` queue message body.
pub use crate::ports::queues::RollbacksMessage as Envelope;

/// How a rollback message was handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    /// Restored; this many Runs reverted.
    Reverted(usize),
    /// Not (any more) under way: nothing to do.
    Stale,
    /// The restore kept failing past [`Platform::rollback_give_up`]: the rollback was given up.
    GivenUp,
}

/// The `rollback-restore` job's work for one message; an error is retried until the rollback
/// is older than the platform's `rollback_give_up`, and then the rollback is given up
/// ([`give_up`]): it always ends.
pub async fn restore<S: PlatformStore, C: Compute>(
    platform: &Platform<'_, S, C>,
    message: &RollbackMessage,
) -> Result<Restored, WorkspaceError> {
    let err = match restore_once(platform, message).await {
        Ok(done) => return Ok(done),
        Err(err) => err,
    };
    let store = platform.store;
    let env = store.environment(&message.project_id, &message.environment_id).await?;
    let Some(active) = env.rollback.as_ref().filter(|a| a.run_id == message.run_id) else {
        return Ok(Restored::Stale);
    };
    if !overdue(active, platform.rollback_give_up, crate::now()) {
        return Err(err);
    }
    tracing::error!(error = %err, run = %message.run_id, "a rollback's restore kept failing: given up");
    give_up(store, &env, active).await?;
    Ok(Restored::GivenUp)
}

/// Whether a rollback accepted at `active.accepted_at` has run out of the time it is given.
pub fn overdue(active: &ActiveRollback, give_up: Duration, now: agentplane_domain::Timestamp) -> bool {
    let limit = i64::try_from(give_up.as_millis()).unwrap_or(i64::MAX);
    now.unix_millis().saturating_sub(active.accepted_at.unix_millis()) >= limit
}

/// Gives up the rollback `active` of `env`: every affected Run still `reverting` reads again as
/// it did ([`run::unrevert`]; none is `reverted`, as no file was restored), the selected one
/// with the `rollback.failed` event, and the environment is released recording why. Idempotent.
pub async fn give_up<S: PlatformStore>(
    store: &S,
    env: &agentplane_domain::platform::Environment,
    active: &ActiveRollback,
) -> Result<(), PortError> {
    let failure = agentplane_domain::platform::RollbackFailure {
        run_id: active.run_id,
        code: run::ROLLBACK_FAILED.into(),
        message: agentplane_domain::platform::ROLLBACK_FAILED_MESSAGE.into(),
        at: crate::now(),
    };
    let ids = store.run_ids_in_order(&env.id, active.from_sequence, active.through_sequence).await?;
    let expected = usize::try_from(active.through_sequence - active.from_sequence + 1).unwrap_or(usize::MAX);
    if ids.len() < expected {
        return Err(PortError::unavailable("the environment's Run index lags; retried"));
    }
    for id in &ids {
        let mut current = store.run(&env.project_id, id).await?;
        for _ in 0..8 {
            if current.status != RunStatus::Reverting {
                break;
            }
            let expected = current.version;
            let mut next = current.clone();
            run::unrevert(&mut next, failure.at);
            next.version = expected + 1;
            let mut events: Vec<_> = super::end::run_event(&next).into_iter().collect();
            if next.id == active.run_id {
                let data = agentplane_domain::webhook::events::rollback_failed(&next, &failure);
                let id = agentplane_domain::webhook::MessageId::from_random(crate::random::unique());
                events.push(OutboxEvent::new(id, next.project_id, "rollback.failed", &data, failure.at));
            }
            match store.replace_run_emitting(&next, expected, &events).await {
                Ok(()) => {
                    if let Err(err) = store.send_events(&events).await {
                        tracing::warn!(error = %err, "could not send a Run's webhook event");
                    }
                    break;
                }
                Err(PortError::Conflict) => current = store.run(&env.project_id, id).await?,
                Err(err) => return Err(err),
            }
        }
    }
    store.fail_rollback(&env.project_id, &env.id, &failure).await?;
    super::lease::send_next(store, &env.project_id, &env.id, active.from_sequence.saturating_sub(1)).await;
    Ok(())
}

async fn restore_once<S: PlatformStore, C: Compute>(
    platform: &Platform<'_, S, C>,
    message: &RollbackMessage,
) -> Result<Restored, WorkspaceError> {
    let store = platform.store;
    let env = match store.environment(&message.project_id, &message.environment_id).await {
        Ok(env) => env,
        Err(PortError::NotFound) => return Ok(Restored::Stale),
        Err(err) => return Err(err.into()),
    };
    let Some(active) = env.rollback.clone().filter(|a| a.run_id == message.run_id) else {
        return Ok(Restored::Stale);
    };
    // The affected set, read strongly (the index only names them).
    let ids = store.run_ids_in_order(&env.id, active.from_sequence, active.through_sequence).await?;
    let expected = usize::try_from(active.through_sequence - active.from_sequence + 1).unwrap_or(usize::MAX);
    if ids.len() < expected {
        return Err(WorkspaceError::internal("the environment's Run index lags; retried"));
    }
    let mut affected = Vec::with_capacity(ids.len());
    for id in &ids {
        affected.push(mark_reverting(store, store.run(&message.project_id, id).await?).await?);
    }
    // Active work stops first: each affected execution's turn ends (its ending is not written),
    // and the restore waits until no execution holds the workspace (its lease given back, or
    // lapsed: an executor that died holds it no longer than a lease).
    loop {
        for run in affected.iter().filter(|r| r.stop_requested && r.started_at.is_some()) {
            cancel_turn(store, run).await;
        }
        let now = store.environment(&message.project_id, &message.environment_id).await?;
        if !now.executing.as_ref().is_some_and(|lease| lease.live(crate::now())) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if let Some(manifest) = &active.manifest {
        let sandbox = workspace::sandbox(platform, &env).await?;
        checkpoint::restore(store, &sandbox, manifest).await?;
    }
    // Each affected session's transcript as it was before its earliest affected Run.
    let mut earliest: BTreeMap<agentplane_domain::SessionId, &Run> = BTreeMap::new();
    for run in &affected {
        earliest.entry(run.session_id).or_insert(run);
    }
    let bucket = store.workspaces()?;
    for run in earliest.values().filter(|r| r.started_at.is_some()) {
        let saved = match bucket.get(&transcript_key(run)).await {
            Ok(bytes) => serde_json::from_slice::<TranscriptBefore>(&bytes)
                .map_err(|e| WorkspaceError::internal(format!("a saved transcript: {e}")))?,
            // The Run never reached its turn: the transcript is as it was.
            Err(PortError::NotFound) => continue,
            Err(err) => return Err(err.into()),
        };
        store.restore_transcript(&run.project_id, &run.session_id, saved.body.as_deref()).await?;
    }
    let mut reverted = 0;
    for run in affected {
        let mut current = run;
        for _ in 0..8 {
            if current.status != RunStatus::Reverting {
                break;
            }
            let expected = current.version;
            let mut next = current.clone();
            run::revert(&mut next);
            next.version = expected + 1;
            let events: Vec<_> = super::end::run_event(&next).into_iter().collect();
            match store.replace_run_emitting(&next, expected, &events).await {
                Ok(()) => {
                    reverted += 1;
                    if let Err(err) = store.send_events(&events).await {
                        tracing::warn!(error = %err, "could not send a Run's webhook event");
                    }
                    break;
                }
                Err(PortError::Conflict) => {
                    current = store.run(&current.project_id, &current.id).await?;
                }
                Err(err) => return Err(err.into()),
            }
        }
    }
    store.end_rollback(&message.project_id, &env.id, &message.run_id).await?;
    // Runs created meanwhile waited for it: the first of them starts now.
    super::lease::send_next(store, &message.project_id, &env.id, active.through_sequence).await;
    Ok(Restored::Reverted(reverted))
}
