//! Rollback: `DELETE /v1/environments/{e}/sessions/{s}/runs/{r}` and the `rollback-restore` job.
//!
//! The route picks the restore point (the checkpoint of the nearest earlier Run that touched the
//! workspace, else the environment's initial one; a pending or failed one refuses the rollback
//! with 409 `checkpoint_unavailable`, so a Run that was not selected is never reverted
//! silently), then freezes the affected set in one conditional write on the environment: the
//! selected Run's `environmentSequence` through the environment's `run_count` as it read it (the
//! write holds only while no Run was created meanwhile and no rollback is under way). The
//! selected Run turns `reverting` and the message goes on the `rollbacks` queue.
//!
//! The job stops the affected Runs that run (their executions end at their next step and write
//! no ending), restores the files (presigned GETs; files not in the manifest removed), restores
//! each affected session's transcript to what it was before its earliest affected Run, marks
//! every affected Run `reverted` (pending or failed checkpoints `skipped`, usage kept) with its
//! `run.reverted` event, and ends the rollback. A second delivery finds the rollback ended and
//! does nothing. While it runs, new Runs wait queued and workspace writes answer 409
//! `rollback_in_progress`.

use std::collections::BTreeMap;
use std::time::Duration;

use agentplane_domain::ProjectId;
use agentplane_domain::platform::ActiveRollback;
use agentplane_domain::platform::run::{self, RestorePoint, RollbackMessage, Run, RunStatus};
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_store::StoreError;
use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;
use serde::{Deserialize, Serialize};

use super::auth::PlatformAuth;
use super::error::{Found, PlatformError, PlatformErrorEnvelope};
use super::runs::{RunState, state};
use super::wire::Data;
use super::{checkpoint, workspace};
use crate::{App, edge};

/// How long the job waits for an affected Run's execution to stop before it restores anyway.
const STOP_WAIT: Duration = Duration::from_secs(60);

/// Whether a rollback holds the environment (new Runs wait, workspace writes are refused).
pub async fn in_progress(
    app: &App,
    project: &ProjectId,
    environment: &EnvironmentId,
) -> Result<bool, StoreError> {
    match app.store.environments().get(project, environment).await {
        Ok(found) => Ok(found.rollback.is_some()),
        Err(StoreError::NotFound) => Ok(false),
        Err(err) => Err(err),
    }
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
async fn restore_point(app: &App, selected: &Run, initial: Option<&str>) -> Result<RestorePoint, StoreError> {
    let mut sequence = selected.environment_sequence;
    let mut earlier = Vec::new();
    while sequence > 1 {
        let from = sequence.saturating_sub(20).max(1);
        let ids = app.store.runs().sequence_range(&selected.environment_id, from, sequence - 1).await?;
        for id in ids.iter().rev() {
            earlier.push(app.store.runs().get(&selected.project_id, id).await?);
        }
        let point = run::restore_point(earlier.iter(), None);
        if point != RestorePoint::Nothing {
            return Ok(point);
        }
        sequence = from;
    }
    Ok(run::restore_point(earlier.iter(), initial))
}

/// Moves `run` to `reverting` (asking a running one to stop, and cancelling its turn).
async fn mark_reverting(app: &App, mut run: Run) -> Result<Run, StoreError> {
    for _ in 0..8 {
        if run.status.is_reverted() {
            return Ok(run);
        }
        let expected = run.version;
        let was_running = run.status == RunStatus::Running;
        let mut next = run.clone();
        next.status = RunStatus::Reverting;
        if was_running {
            next.stop_requested = true;
        }
        next.version = expected + 1;
        match app.store.runs().replace(&next, expected).await {
            Ok(()) => {
                if was_running {
                    cancel_turn(app, &next).await;
                }
                return Ok(next);
            }
            Err(StoreError::Conflict) => run = app.store.runs().get(&run.project_id, &run.id).await?,
            Err(err) => return Err(err),
        }
    }
    Err(StoreError::Conflict)
}

async fn cancel_turn(app: &App, run: &Run) {
    let holder = app.store.sessions().turn_holder(&run.project_id, &run.session_id).await;
    if holder.is_ok_and(|h| h.turn_id.as_deref() == Some(run.turn_id().as_str())) {
        let _ = app.store.sessions().cancel_turn(&run.project_id, &run.session_id, edge::now()).await;
    }
}

/// Roll back a Run and every later Run in its Environment.
#[utoipa::path(
    delete,
    path = "/v1/environments/{environmentId}/sessions/{sessionId}/runs/{runId}",
    tag = "platform",
    operation_id = "platform-runs-rollback",
    params(
        ("environmentId" = String, Path, min_length = 1, description = "Environment identifier."),
        ("sessionId" = String, Path, min_length = 1, description = "Existing Session identifier within the named Environment."),
        ("runId" = String, Path, min_length = 1, description = "Run identifier within the named Environment and Session."),
    ),
    responses(
        (status = 202, description = "Accepted: the Run is `reverting` (or already reverted: nothing changes).", body = Data<RunState>),
        (status = 400, description = "Invalid request.", body = PlatformErrorEnvelope),
        (status = 401, description = "Missing or invalid Platform API token.", body = PlatformErrorEnvelope),
        (status = 404, description = "Resource not found or outside token scope.", body = PlatformErrorEnvelope),
        (status = 409, description = "Another rollback of the environment is under way (`rollback_in_progress`), or the checkpoint before the Run is pending or failed (`checkpoint_unavailable`).", body = PlatformErrorEnvelope),
        (status = 503, description = "Storage is unavailable; try again.", body = PlatformErrorEnvelope),
    ),
)]
pub async fn rollback(
    State(app): State<App>,
    auth: PlatformAuth,
    Path((environment, session, id)): Path<(String, String, String)>,
) -> Result<(StatusCode, Json<Data<RunState>>), PlatformError> {
    let mut run = super::runs::load(&app, &auth, &environment, &session, &id).await?;
    let project = auth.0.project_id;
    for _ in 0..8 {
        if run.status.is_reverted() {
            // Reverting or reverted already: retrying changes nothing.
            return Ok((StatusCode::ACCEPTED, Data::of(state(&run))));
        }
        let env = app
            .store
            .environments()
            .get(&project, &run.environment_id)
            .await
            .or_not_found(PlatformError::EnvironmentNotFound)?;
        if let Some(active) = &env.rollback {
            if (active.from_sequence..=active.through_sequence).contains(&run.environment_sequence) {
                // Part of the rollback under way: it is being reverted.
                run = app.store.runs().get(&project, &run.id).await?;
                return Ok((StatusCode::ACCEPTED, Data::of(state(&run))));
            }
            return Err(PlatformError::RollbackInProgress);
        }
        let manifest = match restore_point(&app, &run, env.initial_checkpoint.as_deref()).await? {
            RestorePoint::Manifest(id) => Some(id),
            RestorePoint::Nothing => None,
            RestorePoint::Unavailable { run_id, status } => {
                return Err(PlatformError::CheckpointUnavailable { run_id: run_id.to_string(), status });
            }
        };
        let active = ActiveRollback {
            run_id: run.id,
            from_sequence: run.environment_sequence,
            through_sequence: env.run_count,
            manifest,
            accepted_at: edge::now(),
        };
        match app.store.environments().begin_rollback(&project, &run.environment_id, &active).await {
            Ok(()) => {
                let run = mark_reverting(&app, run).await?;
                let message = RollbackMessage {
                    project_id: project,
                    environment_id: run.environment_id,
                    run_id: run.id,
                };
                app.store.rollbacks_queue()?.send_json(&Envelope::Rollback(message)).await?;
                return Ok((StatusCode::ACCEPTED, Data::of(state(&run))));
            }
            // A Run was created or another rollback began meanwhile: read again.
            Err(StoreError::Conflict) => run = app.store.runs().get(&project, &run.id).await?,
            Err(err) => return Err(err.into()),
        }
    }
    Err(PlatformError::ConcurrentUpdate)
}

/// A `rollbacks` queue message body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Envelope {
    Rollback(RollbackMessage),
}

/// How a rollback message was handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    /// Restored; this many Runs reverted.
    Reverted(usize),
    /// Not (any more) under way: nothing to do.
    Stale,
}

/// The `rollback-restore` job's work for one message; an error is retried.
pub async fn restore(app: &App, message: &RollbackMessage) -> Result<Restored, PlatformError> {
    let env = match app.store.environments().get(&message.project_id, &message.environment_id).await {
        Ok(env) => env,
        Err(StoreError::NotFound) => return Ok(Restored::Stale),
        Err(err) => return Err(err.into()),
    };
    let Some(active) = env.rollback.clone().filter(|a| a.run_id == message.run_id) else {
        return Ok(Restored::Stale);
    };
    // The affected set, read strongly (the index only names them).
    let ids = app.store.runs().sequence_range(&env.id, active.from_sequence, active.through_sequence).await?;
    let expected = usize::try_from(active.through_sequence - active.from_sequence + 1).unwrap_or(usize::MAX);
    if ids.len() < expected {
        return Err(PlatformError::internal("the environment's Run index lags; retried"));
    }
    let mut affected = Vec::with_capacity(ids.len());
    for id in &ids {
        affected.push(mark_reverting(app, app.store.runs().get(&message.project_id, id).await?).await?);
    }
    // Active work stops first: each affected execution's turn ends (its ending is not written).
    let started = tokio::time::Instant::now();
    for run in affected.iter().filter(|r| r.stop_requested && r.started_at.is_some()) {
        loop {
            let holder = app.store.sessions().turn_holder(&run.project_id, &run.session_id).await?;
            if holder.turn_id.as_deref() != Some(run.turn_id().as_str()) || started.elapsed() > STOP_WAIT {
                break;
            }
            cancel_turn(app, run).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    if let Some(manifest) = &active.manifest {
        let sandbox = workspace::sandbox(app, &env).await?;
        checkpoint::restore(app, &sandbox, manifest).await?;
    }
    // Each affected session's transcript as it was before its earliest affected Run.
    let mut earliest: BTreeMap<agentplane_domain::SessionId, &Run> = BTreeMap::new();
    for run in &affected {
        earliest.entry(run.session_id).or_insert(run);
    }
    let bucket = app.store.workspaces()?;
    for run in earliest.values().filter(|r| r.started_at.is_some()) {
        let saved = match bucket.get(&transcript_key(run)).await {
            Ok(bytes) => serde_json::from_slice::<TranscriptBefore>(&bytes)
                .map_err(|e| PlatformError::internal(format!("a saved transcript: {e}")))?,
            // The Run never reached its turn: the transcript is as it was.
            Err(StoreError::NotFound) => continue,
            Err(err) => return Err(err.into()),
        };
        app.store.transcripts().restore(&run.project_id, &run.session_id, saved.body.as_deref()).await?;
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
            let events: Vec<_> = super::execute::run_event(&next).into_iter().collect();
            match app.store.runs().replace_emitting(&next, expected, &events).await {
                Ok(()) => {
                    reverted += 1;
                    if let Err(err) = app.store.webhooks().dispatch(&events).await {
                        tracing::warn!(error = %err, "could not send a Run's webhook event");
                    }
                    break;
                }
                Err(StoreError::Conflict) => {
                    current = app.store.runs().get(&current.project_id, &current.id).await?;
                }
                Err(err) => return Err(err.into()),
            }
        }
    }
    app.store.environments().end_rollback(&message.project_id, &env.id, &message.run_id).await?;
    Ok(Restored::Reverted(reverted))
}
