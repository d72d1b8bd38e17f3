//! A sandbox's lifecycle on its node: launched on the online node heard from most recently,
//! killed, paused, resumed and given a new deadline. Each change is recorded over the lifecycle
//! read (a change lost to another writer is refused), and the node is told: a pause freezes the
//! sandbox before it is recorded paused, a resume records it running before the node thaws it
//! (and records it paused again if the node cannot), a kill and a new deadline are recorded first
//! and applied when the node gets them.

use std::collections::BTreeMap;

use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::command::{Command, CommandOutcome};
use agentplane_domain::sandbox::request::CreateSandbox;
use agentplane_domain::sandbox::{Lifecycle, LifecycleError, Sandbox, SandboxId, TimeoutSeconds};
use agentplane_domain::{ProjectId, SessionId, Timestamp};

use crate::dispatch::{self, DispatchError};
use crate::ports::PortError;
use crate::ports::sandboxes::SandboxLifecycle;

/// How often a kill reads the sandbox again after losing it to another change.
const KILL_ATTEMPTS: u32 = 5;

/// Why a lifecycle call failed.
#[derive(Debug, thiserror::Error)]
pub enum SandboxFailure {
    /// No such sandbox (or it has ended, for a kill).
    #[error("sandbox not found")]
    NotFound,
    #[error("no sandbox node is online")]
    NoNodeOnline,
    /// The node answered the command with a refusal.
    #[error("the node refused: {0}")]
    NodeRefused(String),
    #[error("no randomness for an id")]
    Randomness,
    /// The lifecycle does not allow the change.
    #[error(transparent)]
    Lifecycle(#[from] LifecycleError),
    #[error(transparent)]
    Dispatch(#[from] DispatchError),
    /// Writing the sandbox's lifecycle failed (`Conflict`: it changed meanwhile).
    #[error("writing the sandbox failed: {0}")]
    Write(PortError),
    #[error(transparent)]
    Port(#[from] PortError),
}

/// What to start a sandbox for.
pub struct Launch {
    pub project_id: ProjectId,
    pub new: CreateSandbox,
    /// Set for a Session's managed compute.
    pub session_id: Option<SessionId>,
}

/// The node that takes a new sandbox: the online node heard from most recently.
async fn pick_node<S: SandboxLifecycle>(store: &S, now: Timestamp) -> Result<NodeId, SandboxFailure> {
    let nodes = store.registered_nodes().await?;
    nodes
        .into_iter()
        .filter(|n| n.online(now))
        .max_by_key(|n| n.last_seen_at)
        .map(|n| n.id)
        .ok_or(SandboxFailure::NoNodeOnline)
}

/// The details of a command the node did, or its refusal.
fn done(outcome: CommandOutcome) -> Result<BTreeMap<String, String>, SandboxFailure> {
    match outcome {
        CommandOutcome::Done { details, .. } => Ok(details),
        CommandOutcome::Failed { message } => {
            tracing::warn!(%message, "node refused a command");
            Err(SandboxFailure::NodeRefused(message))
        }
    }
}

/// Records a sandbox on the most recently heard online node and has that node create it,
/// waiting for its answer. A sandbox the node could not make is recorded killed.
pub async fn launch<S: SandboxLifecycle>(store: &S, launch: Launch) -> Result<Sandbox, SandboxFailure> {
    let now = crate::now();
    let node_id = pick_node(store, now).await?;
    let id = crate::random::secret().map_err(|_| SandboxFailure::Randomness)?;
    let sandbox = Sandbox {
        id: SandboxId::from_random(id),
        project_id: launch.project_id,
        node_id,
        started_at: now,
        lifecycle: Lifecycle::start(now, launch.new.timeout_s),
        metadata: launch.new.metadata,
        env_vars: launch.new.env_vars,
        isolation: Default::default(),
        session_id: launch.session_id,
    };
    store.create_sandbox(&sandbox).await?;
    let command = Command::CreateSandbox {
        sandbox_id: sandbox.id.clone(),
        end_at: sandbox.lifecycle.end_at,
        env_vars: sandbox.env_vars.clone(),
        // Core's side (issue 29, part 1) sets the sandbox's token here.
        envd_access_token: None,
    };
    let outcome = dispatch::run(store, &node_id, command).await.map_err(SandboxFailure::from).and_then(done);
    let isolation = match outcome {
        Ok(isolation) => isolation,
        Err(err) => {
            // Nothing usable was created: record it as killed so it never looks alive, and let
            // the node remove whatever it did make.
            end(store, &sandbox).await;
            return Err(err);
        }
    };
    store.set_isolation(&sandbox.id, &isolation).await?;
    Ok(store.sandbox(&sandbox.id).await.unwrap_or(sandbox))
}

/// Ends a sandbox from inside (its Session's compute released, its creation failed): recorded
/// killed unless it has ended, and its node told. Failures are the node's and the deadline's to
/// settle.
pub async fn end<S: SandboxLifecycle>(store: &S, sandbox: &Sandbox) {
    if !sandbox.lifecycle.effective(crate::now()).is_final()
        && let Ok(killed) = sandbox.lifecycle.kill(crate::now())
    {
        let _ = store.transition_sandbox(sandbox, &sandbox.lifecycle, &killed).await;
    }
    let _ =
        dispatch::enqueue(store, &sandbox.node_id, Command::Kill { sandbox_id: sandbox.id.clone() }).await;
}

/// Kills the sandbox a client asked to kill. Lost to another change (killed by a concurrent
/// delete, paused, extended), it is read again and killed as a delete made now would; an ended
/// sandbox is `NotFound`.
pub async fn kill<S: SandboxLifecycle>(store: &S, mut sandbox: Sandbox) -> Result<(), SandboxFailure> {
    let mut lost = 0;
    loop {
        // An ended sandbox cannot be killed again: it is gone as far as E2B clients know.
        if sandbox.lifecycle.effective(crate::now()).is_final() {
            return Err(SandboxFailure::NotFound);
        }
        let killed = sandbox.lifecycle.kill(crate::now())?;
        match store.transition_sandbox(&sandbox, &sandbox.lifecycle, &killed).await {
            Ok(_) => break,
            Err(PortError::Conflict) if lost < KILL_ATTEMPTS => {
                lost += 1;
                sandbox = match store.project_sandbox(&sandbox.project_id, &sandbox.id).await {
                    Ok(sandbox) => sandbox,
                    Err(PortError::NotFound) => return Err(SandboxFailure::NotFound),
                    Err(err) => return Err(SandboxFailure::Port(err)),
                };
            }
            Err(other) => return Err(SandboxFailure::Write(other)),
        }
    }
    // Recorded first; the node applies it when it gets it (the command stays queued).
    let _ =
        dispatch::enqueue(store, &sandbox.node_id, Command::Kill { sandbox_id: sandbox.id.clone() }).await?;
    Ok(())
}

/// Pauses the sandbox: frozen by its node first (a sandbox recorded paused must really be
/// frozen), then recorded; a record lost to a race thaws it again.
pub async fn pause<S: SandboxLifecycle>(store: &S, sandbox: &Sandbox) -> Result<(), SandboxFailure> {
    let next = sandbox.lifecycle.pause(crate::now())?;
    let outcome =
        dispatch::run(store, &sandbox.node_id, Command::Pause { sandbox_id: sandbox.id.clone() }).await?;
    done(outcome)?;
    if let Err(err) = store.transition_sandbox(sandbox, &sandbox.lifecycle, &next).await {
        // Lost a race (killed, expired or paused meanwhile): undo the freeze where it still runs.
        let _ = dispatch::enqueue(
            store,
            &sandbox.node_id,
            Command::Resume { sandbox_id: sandbox.id.clone(), end_at: sandbox.lifecycle.end_at },
        )
        .await;
        return Err(SandboxFailure::Write(err));
    }
    Ok(())
}

/// Records the lifecycle `rule` gives (over the one read).
async fn change<S: SandboxLifecycle>(
    store: &S,
    sandbox: &Sandbox,
    rule: impl FnOnce(&Lifecycle, Timestamp) -> Result<Lifecycle, LifecycleError>,
) -> Result<Sandbox, SandboxFailure> {
    let next = rule(&sandbox.lifecycle, crate::now())?;
    store.transition_sandbox(sandbox, &sandbox.lifecycle, &next).await.map_err(SandboxFailure::Write)
}

/// Resumes the paused sandbox: recorded running, then thawed by its node; a sandbox its node
/// could not thaw is recorded paused again, with the time it had left.
pub async fn resume<S: SandboxLifecycle>(store: &S, sandbox: &Sandbox) -> Result<Sandbox, SandboxFailure> {
    let resumed = change(store, sandbox, |l, now| l.resume(now)).await?;
    let command = Command::Resume { sandbox_id: resumed.id.clone(), end_at: resumed.lifecycle.end_at };
    if let Err(err) =
        dispatch::run(store, &resumed.node_id, command).await.map_err(SandboxFailure::from).and_then(done)
    {
        if let Ok(paused) = resumed.lifecycle.pause(crate::now()) {
            let _ = store.transition_sandbox(&resumed, &resumed.lifecycle, &paused).await;
        }
        return Err(err);
    }
    Ok(resumed)
}

/// Gives the sandbox a new deadline `timeout` from now; its node is told (it re-reads the
/// deadline before enforcing one, so this only speeds it up).
pub async fn extend<S: SandboxLifecycle>(
    store: &S,
    sandbox: &Sandbox,
    timeout: TimeoutSeconds,
) -> Result<Sandbox, SandboxFailure> {
    let extended = change(store, sandbox, |l, now| l.extend(timeout, now)).await?;
    let command = Command::SetDeadline { sandbox_id: extended.id.clone(), end_at: extended.lifecycle.end_at };
    let _ = dispatch::enqueue(store, &extended.node_id, command).await?;
    Ok(extended)
}

/// The compute sandboxes run on, for the use cases that start and end sandboxes of their own (a
/// Session's managed compute, an environment's workspace): Core's nodes, over `store`.
pub struct OnNodes<'a, S>(pub &'a S);

impl<S: SandboxLifecycle> crate::ports::Compute for OnNodes<'_, S> {
    type Error = SandboxFailure;

    async fn launch(
        &self,
        project_id: ProjectId,
        new: CreateSandbox,
        session_id: Option<SessionId>,
    ) -> Result<Sandbox, SandboxFailure> {
        launch(self.0, Launch { project_id, new, session_id }).await
    }

    async fn end(&self, sandbox: &Sandbox) {
        end(self.0, sandbox).await
    }
}
