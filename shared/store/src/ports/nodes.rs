//! [`NodeRecords`] and [`NodeDaemons`] over DynamoDB.

use crate::Store;
use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::command::CommandEnvelope;
use agentplane_domain::sandbox::host::HostObservation;
use agentplane_domain::sandbox::{Node, Sandbox};
use agentplane_domain::telemetry::SandboxCounters;

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::nodes::{NodeDaemons, NodeRecords};

impl NodeRecords for Store {
    async fn node(&self, id: &NodeId) -> Result<Node, PortError> {
        Ok(self.nodes().get(id).await?)
    }
}

impl NodeDaemons for Store {
    async fn claim_commands(
        &self,
        node: &NodeId,
        connection: &str,
    ) -> Result<Vec<CommandEnvelope>, PortError> {
        Ok(self.nodes().claim_pending(node, connection).await?)
    }

    async fn hosted_sandboxes(&self, node: &NodeId) -> Result<Vec<Sandbox>, PortError> {
        Ok(self.sandboxes().hosted_by(node).await?)
    }

    async fn put_sandbox_counters(&self, counters: &SandboxCounters) -> Result<(), PortError> {
        Ok(self.telemetry().put_sandbox_counters(counters).await?)
    }

    async fn record_heartbeat(&self, node: &NodeId, observation: &HostObservation) -> Result<(), PortError> {
        Ok(self.nodes().record_heartbeat(node, observation).await?)
    }
}
