//! Managing tenants from Core: make one, read it with what its projects spent this month, set
//! or remove its monthly spend limit (a limit with room again carries on the turns the old one
//! paused), and attach a project to it. A project's webhook endpoints move into the tenant's
//! count as it is attached (at most [`MAX_ENDPOINTS`] across the tenant); the attach is written
//! over the project as read, read again up to five times.

use agentplane_domain::ProjectId;
use agentplane_domain::project::{Name, Project};
use agentplane_domain::tenant::{Tenant, TenantId, TenantKey, month_of};
use agentplane_domain::webhook::MAX_ENDPOINTS;

use crate::ports::PortError;
use crate::ports::tenants::TenantAdmin;
use crate::tenant_resume::carry_on_after_tenant_limit;

/// Attempts at an attach before it is given up (a storage conflict).
const ATTACH_ATTEMPTS: usize = 5;

/// Why a call on a tenant failed.
#[derive(Debug, thiserror::Error)]
pub enum TenantError {
    #[error("tenant not found")]
    NotFound,
    #[error("no randomness for an id")]
    Randomness,
    #[error(transparent)]
    Port(PortError),
}

/// Why a project was not attached.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The tenant or the project is missing.
    #[error("tenant or project not found")]
    NotFound,
    /// The project's webhook endpoints do not fit under the tenant's cap.
    #[error("the tenant's webhook endpoints and the project's would pass {MAX_ENDPOINTS}")]
    EndpointLimit,
    #[error(transparent)]
    Port(PortError),
}

impl From<PortError> for AttachError {
    fn from(err: PortError) -> Self {
        match err {
            PortError::NotFound => Self::NotFound,
            other => Self::Port(other),
        }
    }
}

/// A missing tenant is `NotFound`; the rest is the port's.
fn found(err: PortError) -> TenantError {
    match err {
        PortError::NotFound => TenantError::NotFound,
        other => TenantError::Port(other),
    }
}

/// A tenant with what its projects spent in the current month.
#[derive(Debug, Clone)]
pub struct TenantStanding {
    pub tenant: Tenant,
    /// The current calendar month (UTC), `YYYY-MM`.
    pub month: String,
    /// What the tenant's projects spent on agents this month, in USD.
    pub month_spent_usd: f64,
}

/// `tenant` with its spend this month.
async fn standing<S: TenantAdmin>(store: &S, tenant: Tenant) -> Result<TenantStanding, TenantError> {
    let month = month_of(crate::now());
    let spent =
        store.month_spent(&TenantKey::Tenant(tenant.id).key(), &month).await.map_err(TenantError::Port)?;
    Ok(TenantStanding { tenant, month, month_spent_usd: spent })
}

/// Makes a tenant named `name` with the monthly limit `limit` (USD; `None`: no limit).
pub async fn create<S: TenantAdmin>(
    store: &S,
    name: Name,
    limit: Option<f64>,
) -> Result<TenantStanding, TenantError> {
    let id = crate::random::secret().map_err(|_| TenantError::Randomness)?;
    let tenant = Tenant {
        id: TenantId::from_random(id),
        name,
        monthly_spend_limit_usd: limit,
        created_at: crate::now(),
        endpoint_count: 0,
        tenant_endpoint_count: 0,
    };
    store.create_tenant(&tenant).await.map_err(TenantError::Port)?;
    standing(store, tenant).await
}

/// The tenant `id` and its spend this month.
pub async fn get<S: TenantAdmin>(store: &S, id: &TenantId) -> Result<TenantStanding, TenantError> {
    let tenant = store.tenant(id).await.map_err(found)?;
    standing(store, tenant).await
}

/// Sets (`None`: removes) the tenant's monthly limit; the turns the old limit paused carry on
/// when the new one has room.
pub async fn set_limit<S: TenantAdmin>(
    store: &S,
    id: &TenantId,
    limit: Option<f64>,
) -> Result<TenantStanding, TenantError> {
    let tenant = store.set_tenant_limit(id, limit).await.map_err(found)?;
    carry_on_after_tenant_limit(store, &tenant, crate::now()).await.map_err(TenantError::Port)?;
    standing(store, tenant).await
}

/// Attaches the project to the tenant `id` (attached already: nothing changes); the project as
/// it is now. Its spend, its background runs and its webhook endpoints count against the tenant
/// from now on.
pub async fn attach<S: TenantAdmin>(
    store: &S,
    id: &TenantId,
    project: &ProjectId,
) -> Result<Project, AttachError> {
    for _ in 0..ATTACH_ATTEMPTS {
        let current = store.project(project).await?;
        if current.tenant_id == Some(*id) {
            store.tenant(id).await?;
            return Ok(current);
        }
        let endpoints = store.project_endpoint_count(project).await?;
        match store.attach_project(id, &current, endpoints).await {
            Err(PortError::Conflict) => {
                let tenant = store.tenant(id).await?;
                if tenant.endpoint_count + endpoints > MAX_ENDPOINTS {
                    return Err(AttachError::EndpointLimit);
                }
            }
            Ok(()) => return Ok(store.project(project).await?),
            Err(err) => return Err(err.into()),
        }
    }
    Err(AttachError::Port(PortError::Conflict))
}
