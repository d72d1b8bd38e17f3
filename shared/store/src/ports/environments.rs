//! [`EnvironmentForks`] over DynamoDB.

use crate::Store;
use agentplane_domain::platform::Environment;
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_domain::{ProjectId, Timestamp};

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::environments::EnvironmentForks;

impl EnvironmentForks for Store {
    async fn snapshot_source(
        &self,
        project: &ProjectId,
        snapshot: &str,
    ) -> Result<Option<EnvironmentId>, PortError> {
        Ok(self.environments().snapshot_source(project, snapshot).await?)
    }

    async fn create_environment(&self, environment: &Environment, max: u32) -> Result<(), PortError> {
        Ok(self.environments().create(environment, max).await?)
    }

    async fn environment_any(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
    ) -> Result<Environment, PortError> {
        Ok(self.environments().get_any(project, id).await?)
    }

    async fn mark_environment_deleted(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        now: Timestamp,
    ) -> Result<bool, PortError> {
        Ok(self.environments().mark_deleted(project, id, now).await?)
    }
}
