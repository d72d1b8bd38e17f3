//! [`AgentAuthoring`] over DynamoDB.

use crate::Store;
use agentplane_domain::agent::{Agent, AgentVersion};
use agentplane_domain::api_key::ApiKey;
use agentplane_domain::bucket::{BucketName, DocumentBucket};
use agentplane_domain::ids::AgentId;
use agentplane_domain::{ApiKeyId, ProjectId, Timestamp};

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::agents::AgentAuthoring;

impl AgentAuthoring for Store {
    async fn create_agent(&self, agent: &Agent) -> Result<(), PortError> {
        Ok(self.agents().create(agent).await?)
    }

    async fn agent(&self, project: &ProjectId, id: &AgentId) -> Result<Agent, PortError> {
        Ok(self.agents().get(project, id).await?)
    }

    async fn replace_agent(&self, agent: &Agent, previous_update: Timestamp) -> Result<(), PortError> {
        Ok(self.agents().replace(agent, previous_update).await?)
    }

    async fn publish_agent(&self, agent: &Agent, now: Timestamp) -> Result<AgentVersion, PortError> {
        Ok(self.agents().publish(agent, now).await?)
    }

    async fn registered_bucket(
        &self,
        project: &ProjectId,
        name: &BucketName,
    ) -> Result<DocumentBucket, PortError> {
        Ok(self.buckets().get(project, name).await?)
    }

    async fn api_key(&self, project: &ProjectId, id: &ApiKeyId) -> Result<ApiKey, PortError> {
        Ok(self.api_keys().get(project, id).await?)
    }
}
