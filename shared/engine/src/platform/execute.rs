//! The `run-execution` job's side of a platform Run (a `{kind: "platform_run"}` message on the
//! `runs` queue): the Run's session runs one turn with the Run's `model` and `input`, whose
//! tools act on the environment's workspace sandbox (`read_file`, `write_file`, `list_files`,
//! `delete_file`, `run_command`).
//!
//! Every status move is a conditional write on the Run's `version`:
//! - `queued → running` claims it (a duplicate message finds it running and does nothing);
//! - a sandbox that cannot be reached leaves it `running` with the `platform_runtime_unavailable`
//!   diagnostic and the message is sent again later; the next delivery claims it from there and
//!   clears the diagnostic, or ends it `stopped` when a stop came meanwhile;
//! - the end (`completed | failed | stopped`) is written once, with its `run.*` webhook event in
//!   the same transaction. A stop that came after the turn answered leaves it `completed`.
//!
//! A stop is noticed by a watcher that reads the Run while the turn goes on: it records a cancel
//! for the Run's turn (which ends it at its next step, before another model call) and kills a
//! command the Run is running.

use std::sync::Arc;
use std::time::Duration;

use agentplane_domain::agent::{Channel, VersionedConfig};
use agentplane_domain::ids::AgentId;
use agentplane_domain::platform::Environment;
use agentplane_domain::platform::manifest::Manifest;
use agentplane_domain::platform::run::{
    self as run_rules, ExecuteRun, FILE_INVALID, RUNTIME_UNAVAILABLE, Run, RunError, RunStatus,
};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::task::AbortOnDropHandle;

use super::end::{End, finish, update_running};
pub use super::end::{Executed, run_event};
use super::lease::{self, Line};
pub use super::takeover::nudge;
use super::takeover::take_over;
use super::tools::{Kind, ToolContext, WorkspaceTool};
use super::{Platform, WorkspaceError, checkpoint, workspace};
use crate::ports::blobs::Blobs;
use crate::ports::platform::{PlatformRuns, PlatformStore};
use crate::ports::queues::{Queues, RunsMessage};
use crate::ports::{Compute, PortError, TurnStore};
use crate::{TurnContext, TurnError, TurnRequest};

/// The tools a Run's agent has.
pub const TOOLS: [&str; 5] = ["read_file", "write_file", "list_files", "delete_file", "run_command"];
/// What the agent is told about its workspace.
const INSTRUCTIONS: &str = "You work on the files of a workspace mounted at /workspace. Use the tools to read, \
write, list and delete its files and to run shell commands in it. Answer with a short summary when the task is done.";
/// Model calls one Run may make.
const MAX_STEPS: u32 = 50;
/// How often the watcher reads the Run for a stop.
const STOP_POLL: Duration = Duration::from_millis(200);
/// How long a Run whose sandbox cannot be reached (or whose session is busy, or whose
/// environment a rollback holds) waits.
const RETRY_AFTER_S: i32 = 2;
/// How long a Run waiting for an earlier Run of its environment waits before it looks again
/// itself (the earlier Run's end sends it at once; this is the net under that).
const WAIT_AFTER_S: i32 = 30;
/// How long a Run waits for a sandbox node (from its first claim) before it fails with
/// `platform_runtime_unavailable` and frees its environment (10 minutes).
pub const NODE_WAIT: Duration = Duration::from_secs(600);

/// Executes the Run the message names; see the module's notes.
pub async fn execute<S, C>(platform: &Platform<'_, S, C>, message: &ExecuteRun) -> Result<Executed, PortError>
where
    S: PlatformStore + TurnStore + Clone + 'static,
    C: Compute,
{
    let store = platform.store;
    let run = match store.run(&message.project_id, &message.run_id).await {
        Ok(run) => run,
        Err(PortError::NotFound) => return Ok(Executed::Stale),
        Err(err) => return Err(err),
    };
    let environment = match store.environment(&run.project_id, &run.environment_id).await {
        Ok(environment) => environment,
        Err(PortError::NotFound) => {
            let Some(run) = claim(store, run).await? else { return Ok(Executed::Stale) };
            let error =
                RunError { code: "environment_not_found".into(), message: "the environment is gone".into() };
            return finish(store, run, End::failed(error), Instant::now(), None).await;
        }
        Err(err) => return Err(err),
    };
    if run.status == RunStatus::Running && !waits_for_sandbox(&run) {
        return Box::pin(take_over(platform, &environment, run)).await;
    }
    if !claimable(&run) {
        return Ok(Executed::Stale);
    }
    let held = match lease::acquire(store, &environment, &run, platform.lease).await? {
        Line::Go(held) => held,
        Line::Wait => {
            // A rollback ends soon; an earlier Run's end sends this one (the retry is a net).
            let after = if environment.rollback.is_some() { RETRY_AFTER_S } else { WAIT_AFTER_S };
            resend_after(store, message, after).await?;
            return Ok(Executed::Waiting);
        }
    };
    let (lost, lost_seen) = watch::channel(false);
    // Renewed while this execution lives: a crashed executor's lease lapses.
    let keeper = AbortOnDropHandle::new(tokio::spawn(lease::keep(
        store.clone(),
        held.clone(),
        run.project_id,
        run.environment_id,
        platform.lease,
        lost,
    )));
    let environment_id = environment.id;
    let executed = Box::pin(execute_held(platform, message, run, environment, lost_seen)).await;
    drop(keeper);
    lease::release(store, &message.project_id, &environment_id, &held).await;
    executed
}

/// A Run left `running` by a delivery that will not come back: the sandbox could not be
/// reached (its retry), as opposed to an executor that died.
fn waits_for_sandbox(run: &Run) -> bool {
    run.status == RunStatus::Running && run.error.as_ref().is_some_and(|e| e.code == RUNTIME_UNAVAILABLE)
}

fn claimable(run: &Run) -> bool {
    run.status == RunStatus::Queued || waits_for_sandbox(run)
}

/// The Run's execution under its lease: `lost` turns true when the lease is lost, and then
/// nothing more is done or written.
async fn execute_held<S, C>(
    platform: &Platform<'_, S, C>,
    message: &ExecuteRun,
    run: Run,
    environment: Environment,
    mut lost: watch::Receiver<bool>,
) -> Result<Executed, PortError>
where
    S: PlatformStore + TurnStore + Clone + 'static,
    C: Compute,
{
    let store = platform.store;
    let Some(run) = claim(store, run).await? else { return Ok(Executed::Stale) };
    // A stop that came while the Run waited for its sandbox ends it here: nothing ran since
    // the last delivery, so there is nothing to checkpoint.
    if run.stop_requested {
        return finish(store, run, End::stopped(), Instant::now(), None).await;
    }
    let started = Instant::now();
    let sandbox = match workspace::sandbox(platform, &environment).await {
        Ok(sandbox) => sandbox,
        Err(WorkspaceError::RuntimeUnavailable(detail)) => {
            return unreachable(platform, message, run, &detail).await;
        }
        Err(WorkspaceError::Storage(err)) => return Err(requeue(store, &run, err).await),
        Err(other) => {
            let error = RunError { code: "run_failed".into(), message: other.to_string() };
            return finish(store, run, End::failed(error), started, None).await;
        }
    };
    let run = clear_unavailable(store, run).await?;
    // The workspace as the Run starts: its files are checked against it, and its checkpoint
    // is what the Run's diff starts from.
    let known = last_recorded(store, &environment, &run).await;
    let before = match checkpoint::take(store, &sandbox, known.as_ref()).await {
        Ok(taken) => taken,
        Err(WorkspaceError::RuntimeUnavailable(detail)) => {
            return unreachable(platform, message, run, &detail).await;
        }
        Err(WorkspaceError::Storage(err)) => return Err(requeue(store, &run, err).await),
        Err(other) => {
            tracing::warn!(error = %other, run = %run.id, "the checkpoint before a Run failed");
            let error =
                RunError { code: "checkpoint_failed".into(), message: checkpoint::failure_message(&other) };
            return finish(store, run, End::failed(error), started, None).await;
        }
    };
    let Some(run) = checkpoint::record_start(store, run, &before).await? else { return Ok(Executed::Stale) };
    if let Some(error) = invalid_files(&run, &before.manifest) {
        return finish(store, run, End::failed(error), started, Some((&sandbox, &before.manifest))).await;
    }
    let (session, transcript) = match store.session_with_transcript(&run.project_id, &run.session_id).await {
        Ok(found) => found,
        Err(PortError::NotFound) => {
            let error = RunError { code: "session_not_found".into(), message: "the session is gone".into() };
            return finish(store, run, End::failed(error), started, Some((&sandbox, &before.manifest))).await;
        }
        Err(err) => return Err(requeue(store, &run, err).await),
    };
    let hooks =
        store.has_webhooks(&run.project_id).await.map_err(|e| PortError::unavailable(e.to_string()))?;
    // The session's transcript before the Run, for a rollback to restore.
    let saved = super::rollback::TranscriptBefore { body: transcript.as_ref().map(|t| t.body.clone()) };
    let saved = serde_json::to_vec(&saved).map_err(|e| PortError::Corrupt(e.to_string()))?;
    if let Err(err) = store.workspaces()?.put(&super::rollback::transcript_key(&run), saved).await {
        return Err(requeue(store, &run, err).await);
    }

    let (stopping, stop_seen) = watch::channel(false);
    let watcher = tokio::spawn(watch_stop(platform.store(), run.clone(), stopping));
    let _watcher = AbortOnDropHandle::new(watcher);
    let mut engine = platform.engine.clone();
    let mut registry = (*engine.tools).clone();
    let context =
        Arc::new(ToolContext { store: platform.store(), sandbox: sandbox.clone(), stop: stop_seen });
    for kind in [Kind::Read, Kind::Write, Kind::List, Kind::Delete, Kind::Command] {
        registry.register(Arc::new(WorkspaceTool { kind, context: context.clone() }));
    }
    engine.tools = Arc::new(registry);
    let request = TurnRequest {
        project_id: run.project_id,
        session_id: run.session_id,
        agent_id: platform_agent(),
        channel: Channel::Draft,
        version: None,
        config: VersionedConfig {
            model: run.model.clone(),
            instructions: INSTRUCTIONS.into(),
            tools: TOOLS.iter().map(|t| (*t).to_owned()).collect(),
            max_steps: MAX_STEPS,
            attachments: Default::default(),
            human_in_the_loop: Default::default(),
            experience: Default::default(),
        },
        input: run.input.clone(),
        deadline: Instant::now() + platform.turn_budget,
        context: Some(TurnContext {
            last_event_seq: session.last_event_seq,
            transcript,
            spent_usd: session.cost_usd,
            webhooks: hooks,
            superseded: session.superseded_turns.clone(),
        }),
        budget: None,
        turn_id: Some(run.turn_id()),
        handover_at: None,
        tenant: None,
        images: Vec::new(),
        supersede: None,
        replay: None,
    };
    let result = tokio::select! {
        result = Box::pin(engine.run_turn(request)) => result,
        _ = lost.wait_for(|lost| *lost) => {
            // Another delivery may own the workspace now: nothing more is touched or written.
            return Ok(Executed::Stale);
        }
    };
    if *lost.borrow() {
        return Ok(Executed::Stale);
    }
    let end = match result {
        Ok(outcome) => {
            let (status, error) = run_rules::ending(outcome.stop_reason, outcome.error);
            End { status, error, output: outcome.output_text }
        }
        Err(TurnError::Busy | TurnError::ActionsPending(_) | TurnError::BudgetPaused { .. }) => {
            // Another Run of the session holds it: this one waits its turn, queued.
            requeue(store, &run, PortError::Conflict).await;
            resend(store, message).await?;
            return Ok(Executed::Waiting);
        }
        Err(TurnError::SessionNotFound) => {
            End::failed(RunError { code: "session_not_found".into(), message: "the session is gone".into() })
        }
        Err(TurnError::ModelNotPriced { model }) => End::failed(RunError {
            code: "model_not_priced".into(),
            message: format!("the model `{model}` has no price"),
        }),
        Err(TurnError::Storage(err)) => End::failed(RunError {
            code: "storage_unavailable".into(),
            message: format!("storage failed during the Run: {err}"),
        }),
    };
    finish(store, run, end, started, Some((&sandbox, &before.manifest))).await
}

/// The agent id a Run's turns record (Runs have no agent of the client API).
/// The last manifest recorded for the environment before this Run: the Run just before it in
/// the environment's order (its end checkpoint, else its start), else the environment's
/// initial checkpoint. Its blobs are referenced, so the start checkpoint looks up (and the
/// retention sweep's rules refresh) only what changed since: 2 reads and 1 GET instead of a
/// look-up per file. `None` on any failure: every blob is looked up then.
async fn last_recorded<S: PlatformStore>(
    store: &S,
    environment: &agentplane_domain::platform::Environment,
    run: &Run,
) -> Option<Manifest> {
    let previous = run.environment_sequence.checked_sub(1).filter(|n| *n > 0);
    let mut id = None;
    if let Some(n) = previous
        && let Ok(ids) = store.run_ids_in_order(&run.environment_id, n, n).await
        && let Some(prev) = ids.first()
        && let Ok(prev) = store.run(&run.project_id, prev).await
    {
        id = match (prev.checkpoint.status, prev.checkpoint.snapshot_id) {
            (agentplane_domain::platform::run::CheckpointStatus::Ready, Some(snapshot)) => Some(snapshot),
            _ => prev.start_manifest,
        };
    }
    let id = id.or_else(|| environment.initial_checkpoint.clone())?;
    checkpoint::load(store, &id).await.ok()
}

fn platform_agent() -> AgentId {
    AgentId::from_random([0; 16])
}

async fn resend<S: Queues>(store: &S, message: &ExecuteRun) -> Result<(), PortError> {
    resend_after(store, message, RETRY_AFTER_S).await
}

async fn resend_after<S: Queues>(store: &S, message: &ExecuteRun, after_s: i32) -> Result<(), PortError> {
    store.send_run(&RunsMessage::PlatformRun(message.clone()), after_s).await
}

/// `queued → running`, or `running` with the unavailability diagnostic (a retry): the Run this
/// delivery executes; `None` when it is not this delivery's.
async fn claim<S: PlatformRuns>(store: &S, mut run: Run) -> Result<Option<Run>, PortError> {
    for _ in 0..8 {
        let retry = run.status == RunStatus::Running
            && run.error.as_ref().is_some_and(|e| e.code == RUNTIME_UNAVAILABLE);
        if run.status != RunStatus::Queued && !retry {
            return Ok(None);
        }
        let expected = run.version;
        run.status = RunStatus::Running;
        run.started_at.get_or_insert(crate::now());
        run.version = expected + 1;
        match store.replace_run(&run, expected).await {
            Ok(()) => return Ok(Some(run)),
            Err(PortError::Conflict) => run = store.run(&run.project_id, &run.id).await?,
            Err(err) => return Err(err),
        }
    }
    Ok(None)
}

/// The sandbox cannot be reached: the Run waits (`running` with the diagnostic, its message
/// sent again) until it has waited [`Platform::node_wait`] since its first claim, and then
/// fails, so that it never holds its environment's line forever.
async fn unreachable<S: PlatformStore, C: Compute>(
    platform: &Platform<'_, S, C>,
    message: &ExecuteRun,
    run: Run,
    detail: &str,
) -> Result<Executed, PortError> {
    let store = platform.store;
    let waited = run.started_at.map_or(0, |at| crate::now().unix_millis().saturating_sub(at.unix_millis()));
    if waited >= i64::try_from(platform.node_wait.as_millis()).unwrap_or(i64::MAX) {
        tracing::warn!(run = %run.id, detail, "a Run waited too long for a sandbox node: failed");
        let error = RunError {
            code: RUNTIME_UNAVAILABLE.into(),
            message: "no sandbox node could run the Run's workspace in time".into(),
        };
        return finish(store, run, End::failed(error), Instant::now(), None).await;
    }
    unavailable(store, &run, detail).await?;
    resend(store, message).await?;
    Ok(Executed::Unavailable)
}

/// Records that the sandbox cannot be reached (the Run stays `running`).
async fn unavailable<S: PlatformRuns>(store: &S, run: &Run, detail: &str) -> Result<(), PortError> {
    let message = format!("the environment's sandbox cannot be reached: {detail}");
    update_running(
        store,
        run,
        |r| r.error = Some(RunError { code: RUNTIME_UNAVAILABLE.into(), message: message.clone() }),
        |_| Vec::new(),
    )
    .await?;
    Ok(())
}

/// Clears the unavailability diagnostic once the sandbox is reached.
async fn clear_unavailable<S: PlatformRuns>(store: &S, run: Run) -> Result<Run, PortError> {
    if run.error.as_ref().is_none_or(|e| e.code != RUNTIME_UNAVAILABLE) {
        return Ok(run);
    }
    match update_running(store, &run, |r| r.error = None, |_| Vec::new()).await? {
        Some((run, _)) => Ok(run),
        None => Ok(run),
    }
}

/// Puts a Run that could not start back to `queued` (its message comes again); returns `err`.
async fn requeue<S: PlatformRuns>(store: &S, run: &Run, err: PortError) -> PortError {
    let mut current = run.clone();
    for _ in 0..4 {
        if current.status != RunStatus::Running {
            break;
        }
        let expected = current.version;
        let mut next = current.clone();
        next.status = RunStatus::Queued;
        next.started_at = None;
        next.version = expected + 1;
        match store.replace_run(&next, expected).await {
            Ok(()) => break,
            Err(PortError::Conflict) => match store.run(&run.project_id, &run.id).await {
                Ok(found) => current = found,
                Err(_) => break,
            },
            Err(e) => {
                tracing::warn!(error = %e, run = %run.id, "could not put a Run back in the queue");
                break;
            }
        }
    }
    err
}

/// The files the Run names that are not regular files of the workspace (or not of the digest
/// given): the Run fails before it executes.
fn invalid_files(run: &Run, manifest: &Manifest) -> Option<RunError> {
    let bad: Vec<String> = run
        .files
        .iter()
        .filter(|f| match manifest.files.get(&f.path) {
            None => true,
            Some(entry) => f.sha256.as_ref().is_some_and(|sha| *sha != entry.sha256),
        })
        .map(|f| f.path.clone())
        .collect();
    (!bad.is_empty()).then(|| RunError {
        code: FILE_INVALID.into(),
        message: format!("not a regular workspace file (or not of the sha256 given): {}", bad.join(", ")),
    })
}

/// Reads the Run until a stop is requested; then tells the tools (a running command is killed)
/// and records a cancel for the Run's turn, so it ends at its next step.
async fn watch_stop<S: PlatformStore>(store: S, run: Run, stopping: watch::Sender<bool>) {
    let turn_id = run.turn_id();
    let mut seen = false;
    loop {
        tokio::time::sleep(STOP_POLL).await;
        if !seen {
            match store.run(&run.project_id, &run.id).await {
                Ok(found) if found.stop_requested => {
                    seen = true;
                    let _ = stopping.send(true);
                }
                Ok(_) => continue,
                Err(err) => {
                    tracing::warn!(error = %err, run = %run.id, "reading a Run for a stop failed");
                    continue;
                }
            }
        }
        // Cancel the Run's own turn only (once it holds the session).
        match store.turn_holder(&run.project_id, &run.session_id).await {
            Ok(holder) if holder.turn_id.as_deref() == Some(turn_id.as_str()) => {
                if holder.cancel_requested
                    || store.cancel_turn(&run.project_id, &run.session_id, crate::now()).await.is_ok()
                {
                    return;
                }
            }
            Ok(_) | Err(_) => {}
        }
    }
}
