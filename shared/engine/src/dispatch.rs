//! Handing a command to a sandbox's node and waiting for its answer. The command waits in
//! Core's durable queue until the node's daemon claims it, so a daemon restart delays a command
//! rather than losing it.

use std::time::Duration;

use agentplane_domain::ids::{CommandId, NodeId};
use agentplane_domain::sandbox::command::{Command, CommandEnvelope, CommandOutcome};

use crate::ports::PortError;
use crate::ports::commands::NodeCommands;

/// Why a command got no answer.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// The node did not claim or answer the command in time (an unclaimed one is taken back).
    #[error("the sandbox's node did not answer in time")]
    NodeTimeout,
    #[error(transparent)]
    Storage(#[from] PortError),
}

/// How long a request waits for the node.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(10);

pub async fn enqueue<S: NodeCommands>(
    store: &S,
    node: &NodeId,
    command: Command,
) -> Result<CommandId, DispatchError> {
    enqueue_within(store, node, command, ANSWER_WITHIN).await
}

async fn enqueue_within<S: NodeCommands>(
    store: &S,
    node: &NodeId,
    command: Command,
    within: Duration,
) -> Result<CommandId, DispatchError> {
    let now = crate::now();
    let id = CommandId::from_random(crate::random::unique());
    let envelope = CommandEnvelope {
        id,
        issued_at: now,
        expires_at: now.plus_millis(i64::try_from(within.as_millis()).unwrap_or(10_000)),
        command,
    };
    store.enqueue_command(node, &envelope).await?;
    Ok(id)
}

/// Enqueues and waits. When the node does not answer in time, an unclaimed command is taken
/// back so that it never runs late; the caller gets a 503.
pub async fn run<S: NodeCommands>(
    store: &S,
    node: &NodeId,
    command: Command,
) -> Result<CommandOutcome, DispatchError> {
    run_within(store, node, command, ANSWER_WITHIN).await
}

/// [`run`] of a command that may take longer than a request waits (a checkpoint's scan or
/// upload, a restore): the node must claim it within `within`, and answer within `within`.
pub async fn run_within<S: NodeCommands>(
    store: &S,
    node: &NodeId,
    command: Command,
    within: Duration,
) -> Result<CommandOutcome, DispatchError> {
    let id = enqueue_within(store, node, command, within).await?;
    let started = tokio::time::Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        match store.command_outcome(&id).await {
            Ok(Some(outcome)) => return Ok(outcome),
            Ok(None) => {}
            Err(err) => return Err(DispatchError::Storage(err)),
        }
        if started.elapsed() >= within {
            return match store.withdraw_command(node, &id).await {
                Ok(()) | Err(PortError::Conflict) | Err(PortError::NotFound) => {
                    Err(DispatchError::NodeTimeout)
                }
                Err(err) => Err(err.into()),
            };
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}
