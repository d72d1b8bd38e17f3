//! [`SandboxLifecycle`] over DynamoDB.

use agentplane_domain::ProjectId;
use agentplane_domain::sandbox::{Node, Sandbox, SandboxId};
use agentplane_engine::ports::PortError;
use agentplane_engine::ports::sandboxes::SandboxLifecycle;

use crate::Store;

impl SandboxLifecycle for Store {
    async fn registered_nodes(&self) -> Result<Vec<Node>, PortError> {
        Ok(self.nodes().all().await?)
    }

    async fn create_sandbox(&self, sandbox: &Sandbox) -> Result<(), PortError> {
        Ok(self.sandboxes().create(sandbox).await?)
    }

    async fn create_sandbox_within(
        &self,
        sandbox: &Sandbox,
        max: u32,
        now: agentplane_domain::Timestamp,
    ) -> Result<(), PortError> {
        use crate::dynamo::live_sandboxes::CapError;
        match self.sandboxes().create_capped(sandbox, max, now).await {
            Ok(()) => Ok(()),
            Err(CapError::Full { .. }) => Err(PortError::Conflict),
            Err(CapError::Store(err)) => Err(err.into()),
        }
    }

    async fn project_sandbox(&self, project: &ProjectId, id: &SandboxId) -> Result<Sandbox, PortError> {
        Ok(self.sandboxes().get(project, id).await?)
    }
}
