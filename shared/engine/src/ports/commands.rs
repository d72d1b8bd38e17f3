//! Commands to sandbox nodes: what the dispatch of a command (a sandbox's creation, a Run's
//! process, a checkpoint) writes and reads.

use std::future::Future;

use agentplane_domain::ids::{CommandId, NodeId};
use agentplane_domain::sandbox::command::{CommandEnvelope, CommandOutcome};

use super::PortError;

/// The durable queue of commands to sandbox nodes: a command waits until the node's daemon
/// claims it, and its outcome is recorded when the node answers.
pub trait NodeCommands: Send + Sync {
    /// Queues `envelope` for the node `node` (its id is new: `Conflict` otherwise).
    fn enqueue_command(
        &self,
        node: &NodeId,
        envelope: &CommandEnvelope,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// The outcome of the command `id`; `None` while the node has not answered.
    fn command_outcome(
        &self,
        id: &CommandId,
    ) -> impl Future<Output = Result<Option<CommandOutcome>, PortError>> + Send;

    /// Takes back the command `id` the node has not claimed yet; `Conflict` when the node
    /// has it already.
    fn withdraw_command(
        &self,
        node: &NodeId,
        id: &CommandId,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}
