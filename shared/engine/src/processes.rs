//! The processes of a sandbox, as its API starts and reads them. A process starts only in a
//! running sandbox, numbered by the sandbox's counter and started by its node (the start waits
//! for the node's answer). Reads show what was observed and never touch the node: while the
//! sandbox's node is away (silent past the heartbeat window) nobody watches its processes, so
//! running ones read `unknown` with an observation gap, and output the table no longer holds
//! (past its retention) reads truncated.

use agentplane_domain::Timestamp;
use agentplane_domain::sandbox::command::{Command, CommandOutcome};
use agentplane_domain::sandbox::process::{ProcessState, StateFilter, newest_first};
use agentplane_domain::sandbox::request::StartProcess;
use agentplane_domain::sandbox::retention::StoredChunk;
use agentplane_domain::sandbox::{ProcessId, ProcessRecord, Sandbox, SandboxState, as_seen};

use crate::dispatch::{self, DispatchError};
use crate::ports::PortError;
use crate::ports::processes::SandboxProcesses;

/// Why a process call failed.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The sandbox is paused, expired or killed: processes start only in a running one.
    #[error("the sandbox is not running ({0:?})")]
    Stopped(SandboxState),
    /// The process counter refused a new process: the sandbox stopped meanwhile.
    #[error("the sandbox is not running")]
    NotRunning,
    /// The node answered the start with a refusal.
    #[error("the process could not be started: {0}")]
    NotStarted(String),
    /// No such process in the sandbox (or not reported by its node yet).
    #[error("process not found")]
    ProcessNotFound,
    #[error(transparent)]
    Dispatch(#[from] DispatchError),
    #[error(transparent)]
    Port(#[from] PortError),
}

/// A process started: its id and its pid inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub process_id: ProcessId,
    pub pid: Option<u32>,
}

/// Starts a process in the running `sandbox` and waits until its node runs it.
pub async fn start<S: SandboxProcesses>(
    store: &S,
    sandbox: &Sandbox,
    new: StartProcess,
) -> Result<Started, ProcessError> {
    match sandbox.lifecycle.effective(crate::now()) {
        SandboxState::Running => {}
        stopped => return Err(ProcessError::Stopped(stopped)),
    }
    let number = store.next_process_number(&sandbox.id, crate::now()).await.map_err(|e| match e {
        PortError::Conflict => ProcessError::NotRunning,
        other => other.into(),
    })?;
    let command =
        Command::StartProcess { sandbox_id: sandbox.id.clone(), number, config: new.config, tag: new.tag };
    match dispatch::run(store, &sandbox.node_id, command).await? {
        CommandOutcome::Done { pid, .. } => Ok(Started { process_id: ProcessId::Observed(number), pid }),
        CommandOutcome::Failed { message } => Err(ProcessError::NotStarted(message)),
    }
}

/// The sandbox's live processes and retained observations `filter` admits, as seen now, newest
/// first.
pub async fn list<S: SandboxProcesses>(
    store: &S,
    sandbox: &Sandbox,
    filter: StateFilter,
) -> Result<Vec<ProcessRecord>, ProcessError> {
    let now = crate::now();
    let state = sandbox.lifecycle.effective(now);
    let online = node_online(store, sandbox, now).await?;
    let mut records: Vec<_> = store
        .processes(&sandbox.id)
        .await?
        .into_iter()
        .map(|r| as_seen(r, state, online))
        .filter(|r| filter.admits(r.state))
        .collect();
    newest_first(&mut records);
    Ok(records)
}

/// A page of a process's retained output.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputRead {
    /// The process's state as seen now.
    pub state: ProcessState,
    /// Oldest first.
    pub chunks: Vec<StoredChunk>,
    /// The last chunk read (else the cursor read after), to read on from.
    pub cursor: Option<u64>,
    pub has_more: bool,
    /// Output was lost: the node truncated it, or it outlived its retention.
    pub truncated: bool,
    pub observation_gap: bool,
}

/// The process's retained stdout and stderr after the chunk `after`, oldest first, at most
/// `limit` chunks.
pub async fn output<S: SandboxProcesses>(
    store: &S,
    sandbox: &Sandbox,
    process: ProcessId,
    after: Option<u64>,
    limit: usize,
) -> Result<OutputRead, ProcessError> {
    let record = store.process_record(&sandbox.id, process).await.map_err(|e| match e {
        PortError::NotFound => ProcessError::ProcessNotFound,
        other => other.into(),
    })?;
    let now = crate::now();
    let online = node_online(store, sandbox, now).await?;
    let record = as_seen(record, sandbox.lifecycle.effective(now), online);
    let page = store.process_output(&sandbox.id, process, after, limit, now).await?;
    // Chunks the retention index still lists but the table no longer holds outlived their
    // retention: that output is lost, and the read says so.
    let (retained, _) = store.load_index(&sandbox.id).await?;
    let seqs: Vec<u64> = page.chunks.iter().map(|c| c.seq).collect();
    let lost = page.expired || retained.index.output_lost(process, after, &seqs, !page.has_more);
    let cursor = page.chunks.last().map(|c| c.seq).or(after);
    Ok(OutputRead {
        state: record.state,
        chunks: page.chunks,
        cursor,
        has_more: page.has_more,
        truncated: record.output_truncated || lost,
        observation_gap: record.observation_gap,
    })
}

/// Whether the sandbox's node has been heard from within the heartbeat window. A node that no
/// longer exists watches nothing.
async fn node_online<S: SandboxProcesses>(
    store: &S,
    sandbox: &Sandbox,
    now: Timestamp,
) -> Result<bool, PortError> {
    match store.node(&sandbox.node_id).await {
        Ok(node) => Ok(node.online(now)),
        Err(PortError::NotFound) => Ok(false),
        Err(other) => Err(other),
    }
}
