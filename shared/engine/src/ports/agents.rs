//! What authoring an agent reads and writes: the agent itself (created once, changed only over
//! the version read, published as numbered versions) and what its draft refers to (a registered
//! bucket, the project's keys).

use std::future::Future;

use agentplane_domain::agent::{Agent, AgentVersion};
use agentplane_domain::api_key::ApiKey;
use agentplane_domain::bucket::{BucketName, DocumentBucket};
use agentplane_domain::ids::AgentId;
use agentplane_domain::{ApiKeyId, ProjectId, Timestamp};

use super::PortError;

/// Agents and what their drafts refer to.
pub trait AgentAuthoring: Send + Sync {
    /// Writes a new agent; `Conflict` when its id is taken.
    fn create_agent(&self, agent: &Agent) -> impl Future<Output = Result<(), PortError>> + Send;

    /// The agent `id` of `project`; `NotFound` when the project has none.
    fn agent(
        &self,
        project: &ProjectId,
        id: &AgentId,
    ) -> impl Future<Output = Result<Agent, PortError>> + Send;

    /// Writes the changed agent back, only if it was last changed at `previous_update`
    /// (`Conflict`: somebody changed it meanwhile).
    fn replace_agent(
        &self,
        agent: &Agent,
        previous_update: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Publishes the agent's draft as its next version, only if the agent is still as read
    /// (`Conflict` otherwise); the version it made.
    fn publish_agent(
        &self,
        agent: &Agent,
        now: Timestamp,
    ) -> impl Future<Output = Result<AgentVersion, PortError>> + Send;

    /// The bucket `name` registered to `project`; `NotFound` when there is none.
    fn registered_bucket(
        &self,
        project: &ProjectId,
        name: &BucketName,
    ) -> impl Future<Output = Result<DocumentBucket, PortError>> + Send;

    /// The key `id` of `project` (revoked ones too); `NotFound` when there is none.
    fn api_key(
        &self,
        project: &ProjectId,
        id: &ApiKeyId,
    ) -> impl Future<Output = Result<ApiKey, PortError>> + Send;
}
