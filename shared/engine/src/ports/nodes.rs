//! What the node daemons' side of Core reads and writes: the registered node, the commands it
//! claims, the sandboxes it hosts, their usage counters and its heartbeats.

use std::future::Future;

use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::command::CommandEnvelope;
use agentplane_domain::sandbox::host::HostObservation;
use agentplane_domain::sandbox::{Node, Sandbox};
use agentplane_domain::telemetry::SandboxCounters;

use super::PortError;

/// Registered sandbox nodes, one by id.
pub trait NodeRecords: Send + Sync {
    /// The node `id`; `NotFound` when it is not registered (any more).
    fn node(&self, id: &NodeId) -> impl Future<Output = Result<Node, PortError>> + Send;
}

/// What a node daemon's polls and heartbeats read and write.
pub trait NodeDaemons: NodeRecords + Send + Sync {
    /// Claims the node's pending commands for the connection `connection`, oldest first (a
    /// claimed command is not handed out again); empty when none is pending.
    fn claim_commands(
        &self,
        node: &NodeId,
        connection: &str,
    ) -> impl Future<Output = Result<Vec<CommandEnvelope>, PortError>> + Send;

    /// The sandboxes the node hosts, as Core knows them.
    fn hosted_sandboxes(&self, node: &NodeId)
    -> impl Future<Output = Result<Vec<Sandbox>, PortError>> + Send;

    /// Writes a sandbox's usage counters; `Conflict` when newer ones are stored already.
    fn put_sandbox_counters(
        &self,
        counters: &SandboxCounters,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Records the node's host observation (its history first, then the node's item);
    /// `NotFound` when the node is not registered.
    fn record_heartbeat(
        &self,
        node: &NodeId,
        observation: &HostObservation,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}
