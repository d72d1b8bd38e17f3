//! [`RunRequests`] over DynamoDB.

use crate::Store;
use agentplane_domain::agent_run::{AgentRun, RunId, RunStatus};
use agentplane_domain::{ProjectId, Timestamp};

use agentplane_engine::ports::runs::RunRequests;
use agentplane_engine::ports::{OutboxEvent, PortError};

impl RunRequests for Store {
    async fn create_agent_run(&self, run: &AgentRun, emit: &OutboxEvent) -> Result<(), PortError> {
        Ok(self.agent_runs().create(run, emit).await?)
    }

    async fn transition_agent_run(
        &self,
        project: &ProjectId,
        id: &RunId,
        from: RunStatus,
        to: RunStatus,
        emit: Option<&OutboxEvent>,
        now: Timestamp,
    ) -> Result<AgentRun, PortError> {
        Ok(self.agent_runs().transition(project, id, from, to, emit, now).await?)
    }

    async fn request_run_cancel(&self, project: &ProjectId, id: &RunId) -> Result<AgentRun, PortError> {
        Ok(self.agent_runs().request_cancel(project, id).await?)
    }
}
