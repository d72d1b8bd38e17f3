//! [`NodeCommands`] over DynamoDB.

use crate::Store;
use agentplane_domain::ids::{CommandId, NodeId};
use agentplane_domain::sandbox::command::{CommandEnvelope, CommandOutcome};

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::commands::NodeCommands;

impl NodeCommands for Store {
    async fn enqueue_command(&self, node: &NodeId, envelope: &CommandEnvelope) -> Result<(), PortError> {
        Ok(self.nodes().enqueue(node, envelope).await?)
    }

    async fn command_outcome(&self, id: &CommandId) -> Result<Option<CommandOutcome>, PortError> {
        Ok(self.nodes().outcome(id).await?)
    }

    async fn withdraw_command(&self, node: &NodeId, id: &CommandId) -> Result<(), PortError> {
        Ok(self.nodes().withdraw(node, id).await?)
    }
}
