//! A Run's end as its executor writes it: the end checkpoint, then the ending with its `run.*`
//! event in one conditional write on the Run's version ([`finish`]); what an execution ended in
//! ([`Executed`]).

use agentplane_domain::platform::manifest::Manifest;
use agentplane_domain::platform::run::{Run, RunError, RunStatus};
use agentplane_domain::sandbox::Sandbox;
use tokio::time::Instant;

use super::checkpoint;
pub(crate) use super::running::update_running;
use crate::ports::platform::{PlatformRuns, PlatformStore};
use crate::ports::{OutboxEvent, PortError};

/// How the execution ended.
pub(super) struct End {
    pub(super) status: RunStatus,
    pub(super) error: Option<RunError>,
    pub(super) output: Option<String>,
}

impl End {
    pub(super) fn failed(error: RunError) -> Self {
        Self { status: RunStatus::Failed, error: Some(error), output: None }
    }

    pub(super) fn stopped() -> Self {
        Self { status: RunStatus::Stopped, error: None, output: None }
    }
}

/// The `run.*` event of a Run that reached its status.
pub fn run_event(run: &Run) -> Option<OutboxEvent> {
    let kind = run.status.event_type()?;
    let data = agentplane_domain::webhook::events::platform_run(run);
    let id = agentplane_domain::webhook::MessageId::from_random(crate::random::unique());
    Some(OutboxEvent::new(id, run.project_id, kind, &data, crate::now()))
}

/// Adds `elapsed` ms of sandbox time to a Run a rollback took while it executed (reverting or
/// reverted), by a conditional write on its version.
async fn add_runtime_of_reverted<S: PlatformRuns>(
    store: &S,
    run: &Run,
    elapsed: u64,
) -> Result<(), PortError> {
    let mut current = store.run(&run.project_id, &run.id).await?;
    for _ in 0..8 {
        if !current.status.is_reverted() {
            return Ok(());
        }
        let expected = current.version;
        let mut next = current.clone();
        next.sandbox_runtime_ms = next.sandbox_runtime_ms.saturating_add(elapsed);
        next.version = expected + 1;
        match store.replace_run(&next, expected).await {
            Ok(()) => return Ok(()),
            Err(PortError::Conflict) => current = store.run(&run.project_id, &run.id).await?,
            Err(err) => return Err(err),
        }
    }
    Err(PortError::Conflict)
}

/// Checkpoints the workspace (when the sandbox was reached) and writes the Run's end with its
/// event, once.
pub(super) async fn finish<S: PlatformStore>(
    store: &S,
    run: Run,
    end: End,
    started: Instant,
    workspace: Option<(&Sandbox, &Manifest)>,
) -> Result<Executed, PortError> {
    let after = match workspace {
        Some((sandbox, before)) => Some(checkpoint::take(store, sandbox, Some(before)).await),
        None => None,
    };
    if let Some(Err(err)) = &after {
        tracing::warn!(error = %err, run = %run.id, "the checkpoint after a Run failed");
    }
    let before = workspace.map(|(_, manifest)| manifest);
    let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let now = crate::now();
    let written = update_running(
        store,
        &run,
        |r| {
            r.status = end.status;
            r.error = end.error.clone();
            r.output = end.output.clone();
            r.finished_at = Some(now);
            r.sandbox_runtime_ms = r.sandbox_runtime_ms.saturating_add(elapsed);
            checkpoint::record_end(r, before, after.as_ref());
        },
        |r| run_event(r).into_iter().collect(),
    )
    .await?;
    match written {
        Some((run, events)) => {
            if let Err(err) = store.send_events(&events).await {
                tracing::warn!(error = %err, run = %run.id, "could not send a Run's webhook event");
            }
            Ok(Executed::Ran(run.status))
        }
        None => {
            // A rollback took it mid-execution: its ending is not written, but the sandbox
            // time it used is (usage is kept through a rollback).
            add_runtime_of_reverted(store, &run, elapsed).await?;
            Ok(Executed::Stale)
        }
    }
}

/// How the message was handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executed {
    /// Executed to this status.
    Ran(RunStatus),
    /// Not this delivery's to run (started, stopped, reverted or gone).
    Stale,
    /// Its session runs another turn, or a rollback holds the environment: queued again.
    Waiting,
    /// The sandbox cannot be reached: `running` with the diagnostic, sent again.
    Unavailable,
}
