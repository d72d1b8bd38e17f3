//! [`TenantAdmin`] over DynamoDB.

use crate::Store;
use agentplane_domain::ProjectId;
use agentplane_domain::project::Project;
use agentplane_domain::tenant::{Tenant, TenantId};

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::tenants::TenantAdmin;

impl TenantAdmin for Store {
    async fn create_tenant(&self, tenant: &Tenant) -> Result<(), PortError> {
        Ok(self.tenants().create(tenant).await?)
    }

    async fn set_tenant_limit(&self, id: &TenantId, limit: Option<f64>) -> Result<Tenant, PortError> {
        Ok(self.tenants().set_limit(id, limit).await?)
    }

    async fn project_endpoint_count(&self, project: &ProjectId) -> Result<u32, PortError> {
        Ok(self.webhooks().count(project).await?)
    }

    async fn attach_project(
        &self,
        id: &TenantId,
        project: &Project,
        endpoints: u32,
    ) -> Result<(), PortError> {
        Ok(self.tenants().attach(id, project, endpoints).await?)
    }
}
