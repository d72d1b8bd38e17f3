//! What managing tenants reads and writes besides what carrying paused turns on does
//! ([`TenantResume`]): a tenant made once, its monthly limit set, and projects attached to it
//! with their webhook endpoints counted toward its cap.

use std::future::Future;

use agentplane_domain::ProjectId;
use agentplane_domain::project::Project;
use agentplane_domain::tenant::{Tenant, TenantId};

use super::PortError;
use super::background::TenantResume;

/// Tenants and the projects attached to them.
pub trait TenantAdmin: TenantResume + Send + Sync {
    /// Writes a new tenant; `Conflict` when its id is taken.
    fn create_tenant(&self, tenant: &Tenant) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Sets (`None`: removes) the tenant's monthly spend limit; the tenant as written.
    /// `NotFound` when there is no such tenant.
    fn set_tenant_limit(
        &self,
        id: &TenantId,
        limit: Option<f64>,
    ) -> impl Future<Output = Result<Tenant, PortError>> + Send;

    /// How many webhook endpoints the project has of its own.
    fn project_endpoint_count(
        &self,
        project: &ProjectId,
    ) -> impl Future<Output = Result<u32, PortError>> + Send;

    /// Attaches `project` (as read) to the tenant `id` in one all-or-nothing write, moving its
    /// `endpoints` webhook endpoints into the tenant's count (out of the tenant it leaves).
    /// `NotFound` when the tenant or the project is missing; `Conflict` when a condition did not
    /// hold (the project's tenant or endpoint count moved, or the endpoints do not fit under the
    /// tenant's cap): read again to tell which.
    fn attach_project(
        &self,
        id: &TenantId,
        project: &Project,
        endpoints: u32,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}
