//! Tenants under Core: `POST /core/v1/tenants`, `GET` and `PATCH /core/v1/tenants/{tenant_id}`
//! (the monthly spend limit), and `PUT /core/v1/tenants/{tenant_id}/projects/{project_id}` to
//! attach a project. A project without a tenant is its own.

use agentplane_domain::ProjectId;
use agentplane_domain::project::Name;
use agentplane_domain::tenant::TenantId;
use agentplane_engine::tenants::{self, TenantStanding};
use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::CoreAdmin;
use super::error::CoreError;
use super::projects::ProjectBody;
use crate::App;
use crate::body::Wire;
use crate::envelope::ErrorEnvelope;

/// `POST /core/v1/tenants`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTenant {
    /// 1 to 128 characters once surrounding whitespace is trimmed.
    #[schema(min_length = 1, max_length = 128)]
    pub name: String,
    /// The most the tenant's projects may spend on agents in a calendar month (UTC), in USD;
    /// absent or `null`: no limit.
    #[schema(minimum = 0, maximum = 1_000_000_000)]
    pub monthly_spend_limit_usd: Option<f64>,
}

/// `PATCH /core/v1/tenants/{tenant_id}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateTenant {
    /// The new monthly limit in USD; `null` removes it; absent leaves it.
    #[serde(default, deserialize_with = "crate::body::nullable")]
    #[schema(value_type = Option<f64>, minimum = 0, maximum = 1_000_000_000)]
    pub monthly_spend_limit_usd: Option<Option<f64>>,
}

/// A tenant, with what its projects spent this month.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantBody {
    #[schema(value_type = String)]
    pub id: TenantId,
    /// Always `tenant`.
    #[schema(pattern = "^tenant$")]
    pub object: &'static str,
    pub name: String,
    pub monthly_spend_limit_usd: Option<f64>,
    /// The current calendar month (UTC), `YYYY-MM`.
    pub month: String,
    /// What the tenant's projects spent on agents this month, in USD.
    pub month_spent_usd: f64,
    /// Webhook endpoints across the tenant, its own and its projects' (at most 50).
    pub webhook_endpoint_count: u32,
    /// Of those, the tenant's own (tenant-wide) endpoints.
    pub tenant_webhook_endpoint_count: u32,
    /// Unix seconds.
    pub created_at: i64,
}

impl From<TenantStanding> for TenantBody {
    fn from(standing: TenantStanding) -> Self {
        let tenant = standing.tenant;
        Self {
            id: tenant.id,
            object: "tenant",
            name: tenant.name.as_str().to_owned(),
            monthly_spend_limit_usd: tenant.monthly_spend_limit_usd,
            month: standing.month,
            month_spent_usd: standing.month_spent_usd,
            webhook_endpoint_count: tenant.endpoint_count,
            tenant_webhook_endpoint_count: tenant.tenant_endpoint_count,
            created_at: tenant.created_at.unix_seconds(),
        }
    }
}

fn limit(value: Option<f64>) -> Result<Option<f64>, CoreError> {
    value
        .map(|v| {
            agentplane_domain::pricing::usd_amount(v).ok_or_else(|| {
                agentplane_domain::ValidationError::new(
                    "monthly_spend_limit_usd",
                    "`monthly_spend_limit_usd` must be a number from 0 to 1000000000",
                )
                .into()
            })
        })
        .transpose()
}

pub(crate) fn tenant_id(text: &str) -> Result<TenantId, CoreError> {
    text.parse().map_err(|_| CoreError::NotFound("tenant"))
}

/// Create a tenant.
#[utoipa::path(
    post,
    path = "/core/v1/tenants",
    tag = "core",
    operation_id = "core-tenants-create",
    request_body = CreateTenant,
    responses(
        (status = 201, description = "The new tenant.", body = TenantBody),
        (status = 400, description = "The body is not a valid request.", body = ErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    _admin: CoreAdmin,
    Wire(body, _): Wire<CreateTenant, CoreError>,
) -> Result<(StatusCode, Json<TenantBody>), CoreError> {
    let name = Name::new("name", &body.name)?;
    let limit = limit(body.monthly_spend_limit_usd)?;
    let standing = tenants::create(&app.store, name, limit).await?;
    Ok((StatusCode::CREATED, Json(TenantBody::from(standing))))
}

/// Retrieve a tenant and its spend this month.
#[utoipa::path(
    get,
    path = "/core/v1/tenants/{tenant_id}",
    tag = "core",
    operation_id = "core-tenants-get",
    params(("tenant_id" = String, Path, description = "The tenant's id.")),
    responses(
        (status = 200, description = "The tenant.", body = TenantBody),
        (status = 404, description = "No such tenant.", body = ErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path(id): Path<String>,
) -> Result<Json<TenantBody>, CoreError> {
    let standing = tenants::get(&app.store, &tenant_id(&id)?).await?;
    Ok(Json(TenantBody::from(standing)))
}

/// Set or remove a tenant's monthly spend limit.
#[utoipa::path(
    patch,
    path = "/core/v1/tenants/{tenant_id}",
    tag = "core",
    operation_id = "core-tenants-update",
    params(("tenant_id" = String, Path, description = "The tenant's id.")),
    request_body = UpdateTenant,
    responses(
        (status = 200, description = "The tenant as it is now.", body = TenantBody),
        (status = 400, description = "The body is not a valid request.", body = ErrorEnvelope),
        (status = 404, description = "No such tenant.", body = ErrorEnvelope),
    ),
)]
pub async fn update(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path(id): Path<String>,
    Wire(body, _): Wire<UpdateTenant, CoreError>,
) -> Result<Json<TenantBody>, CoreError> {
    let id = tenant_id(&id)?;
    let standing = match body.monthly_spend_limit_usd {
        // The turns the old limit paused carry on when the new one has room.
        Some(value) => tenants::set_limit(&app.store, &id, limit(value)?).await?,
        None => tenants::get(&app.store, &id).await?,
    };
    Ok(Json(TenantBody::from(standing)))
}

/// Attach a project to a tenant: its spend and its background runs count against the tenant
/// from now on. Its webhook endpoints count toward the tenant's 50 from now on too.
#[utoipa::path(
    put,
    path = "/core/v1/tenants/{tenant_id}/projects/{project_id}",
    tag = "core",
    operation_id = "core-tenants-projects-attach",
    params(
        ("tenant_id" = String, Path, description = "The tenant's id."),
        ("project_id" = String, Path, description = "The project's id."),
    ),
    responses(
        (status = 200, description = "The project, now of the tenant.", body = ProjectBody),
        (status = 404, description = "No such tenant or project.", body = ErrorEnvelope),
        (status = 409, description = "The project's webhook endpoints and the tenant's would pass 50 (`webhook_limit_reached`).", body = ErrorEnvelope),
    ),
)]
pub async fn attach(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path((id, project)): Path<(String, String)>,
) -> Result<Json<ProjectBody>, CoreError> {
    let id = tenant_id(&id)?;
    let project: ProjectId = project.parse().map_err(|_| CoreError::NotFound("tenant or project"))?;
    let project = tenants::attach(&app.store, &id, &project).await?;
    Ok(Json(ProjectBody::from(&project)))
}
