//! Handing a command to a sandbox's node and waiting for its answer. The command waits in
//! Core's durable queue until the node's daemon claims it, so a daemon restart delays a command
//! rather than losing it.

use std::time::Duration;

use agentplane_domain::ids::{CommandId, NodeId};
use agentplane_domain::sandbox::command::{Command, CommandEnvelope, CommandOutcome};
use agentplane_store::StoreError;

use super::error::SandboxError;
use crate::{App, edge};

/// How long a request waits for the node.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(10);

pub async fn enqueue(app: &App, node: &NodeId, command: Command) -> Result<CommandId, SandboxError> {
    enqueue_within(app, node, command, ANSWER_WITHIN).await
}

async fn enqueue_within(
    app: &App,
    node: &NodeId,
    command: Command,
    within: Duration,
) -> Result<CommandId, SandboxError> {
    let now = edge::now();
    let id = CommandId::from_random(edge::random().map_err(|_| SandboxError::Internal("randomness"))?);
    let envelope = CommandEnvelope {
        id,
        issued_at: now,
        expires_at: now.plus_millis(i64::try_from(within.as_millis()).unwrap_or(10_000)),
        command,
    };
    app.store.nodes().enqueue(node, &envelope).await?;
    Ok(id)
}

/// Enqueues and waits. When the node does not answer in time, an unclaimed command is taken
/// back so that it never runs late; the caller gets a 503.
pub async fn run(app: &App, node: &NodeId, command: Command) -> Result<CommandOutcome, SandboxError> {
    run_within(app, node, command, ANSWER_WITHIN).await
}

/// [`run`] of a command that may take longer than a request waits (a checkpoint's scan or
/// upload, a restore): the node must claim it within `within`, and answer within `within`.
pub async fn run_within(
    app: &App,
    node: &NodeId,
    command: Command,
    within: Duration,
) -> Result<CommandOutcome, SandboxError> {
    let id = enqueue_within(app, node, command, within).await?;
    let started = tokio::time::Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        match app.store.nodes().outcome(&id).await {
            Ok(Some(outcome)) => return Ok(outcome),
            Ok(None) => {}
            Err(err) => return Err(err.into()),
        }
        if started.elapsed() >= within {
            return match app.store.nodes().withdraw(node, &id).await {
                Ok(()) | Err(StoreError::Conflict) | Err(StoreError::NotFound) => {
                    Err(SandboxError::NodeTimeout)
                }
                Err(err) => Err(err.into()),
            };
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}
