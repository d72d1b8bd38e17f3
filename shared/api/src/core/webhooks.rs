//! Core's tenant-wide webhook endpoints (`/core/v1/tenants/{tenant_id}/webhooks`): they receive
//! the events of every project of the tenant, and count toward the same 50 per tenant as the
//! projects' own. What each route does is `crate::webhooks::service`'s, as for a project's.

use agentplane_domain::webhook::Owner;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;

use super::auth::CoreAdmin;
use super::error::{CoreError, Found};
use super::tenants::tenant_id;
use crate::App;
use crate::body::Wire;
use crate::envelope::ErrorEnvelope;
use crate::list::{List, PageParams};
use crate::webhooks::service;
use crate::webhooks::wire::{
    AttemptBody, CreateWebhook, MessageList, MessageParams, RotateSecret, UpdateWebhook, WebhookBody,
    WebhookDeleted, WebhookWithSecret,
};

/// The tenant `text` names, once it is known to exist (404 `tenant not found` otherwise).
async fn owner(app: &App, text: &str) -> Result<Owner, CoreError> {
    let id = tenant_id(text)?;
    app.store.tenants().get(&id).await.or_not_found(CoreError::NotFound("tenant"))?;
    Ok(Owner::Tenant(id))
}

/// Create a tenant-wide webhook endpoint.
///
/// It receives the events of every project of the tenant. The answer carries its signing
/// secret, never shown again. A tenant has at most 50 endpoints, its own and its projects'.
#[utoipa::path(
    post,
    path = "/core/v1/tenants/{tenant_id}/webhooks",
    tag = "core",
    operation_id = "core-tenant-webhooks-create",
    params(("tenant_id" = String, Path, description = "The tenant's id.")),
    request_body = CreateWebhook,
    responses(
        (status = 201, description = "The new endpoint, with its secret (shown once).", body = WebhookWithSecret),
        (status = 400, description = "The body is invalid (`param` names the field), or the URL points at a private address (`url_not_allowed`).", body = ErrorEnvelope),
        (status = 404, description = "No such tenant.", body = ErrorEnvelope),
        (status = 409, description = "The tenant has 50 endpoints already, its own and its projects' (`webhook_limit_reached`).", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or webhooks are not configured; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path(tenant): Path<String>,
    Wire(body, _): Wire<CreateWebhook, CoreError>,
) -> Result<(StatusCode, Json<WebhookWithSecret>), CoreError> {
    let owner = owner(&app, &tenant).await?;
    Ok((StatusCode::CREATED, Json(service::create(&app, owner, body).await?)))
}

/// List the tenant's own webhook endpoints, newest first (its projects' are listed by each
/// project).
#[utoipa::path(
    get,
    path = "/core/v1/tenants/{tenant_id}/webhooks",
    tag = "core",
    operation_id = "core-tenant-webhooks-list",
    params(("tenant_id" = String, Path, description = "The tenant's id."), PageParams),
    responses(
        (status = 200, description = "A page of endpoints.", body = List<WebhookBody>),
        (status = 400, description = "A page parameter is invalid.", body = ErrorEnvelope),
        (status = 404, description = "No such tenant, or `after` names no endpoint of it (`cursor_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path(tenant): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<List<WebhookBody>>, CoreError> {
    let owner = owner(&app, &tenant).await?;
    Ok(Json(service::list(&app, owner, raw.as_deref()).await?))
}

/// Retrieve a tenant-wide webhook endpoint.
#[utoipa::path(
    get,
    path = "/core/v1/tenants/{tenant_id}/webhooks/{endpoint_id}",
    tag = "core",
    operation_id = "core-tenant-webhooks-get",
    params(
        ("tenant_id" = String, Path, description = "The tenant's id."),
        ("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`)."),
    ),
    responses(
        (status = 200, description = "The endpoint.", body = WebhookBody),
        (status = 404, description = "No such tenant, or no such endpoint of it (`webhook_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<Json<WebhookBody>, CoreError> {
    let owner = owner(&app, &tenant).await?;
    Ok(Json(WebhookBody::from(&service::load(&app, owner, &id).await?)))
}

/// Change a tenant-wide webhook endpoint's URL, event types, description or whether it is
/// enabled.
#[utoipa::path(
    patch,
    path = "/core/v1/tenants/{tenant_id}/webhooks/{endpoint_id}",
    tag = "core",
    operation_id = "core-tenant-webhooks-update",
    params(
        ("tenant_id" = String, Path, description = "The tenant's id."),
        ("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`)."),
    ),
    request_body = UpdateWebhook,
    responses(
        (status = 200, description = "The endpoint as changed.", body = WebhookBody),
        (status = 400, description = "The body is invalid (`param` names the field), or the URL points at a private address (`url_not_allowed`).", body = ErrorEnvelope),
        (status = 404, description = "No such tenant, or no such endpoint of it (`webhook_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The endpoint kept changing meanwhile (`concurrent_update`); try again.", body = ErrorEnvelope),
    ),
)]
pub async fn update(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path((tenant, id)): Path<(String, String)>,
    Wire(body, _): Wire<UpdateWebhook, CoreError>,
) -> Result<Json<WebhookBody>, CoreError> {
    let owner = owner(&app, &tenant).await?;
    Ok(Json(service::update(&app, owner, &id, body).await?))
}

/// Delete a tenant-wide webhook endpoint. Its messages are no longer sent.
#[utoipa::path(
    delete,
    path = "/core/v1/tenants/{tenant_id}/webhooks/{endpoint_id}",
    tag = "core",
    operation_id = "core-tenant-webhooks-delete",
    params(
        ("tenant_id" = String, Path, description = "The tenant's id."),
        ("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`)."),
    ),
    responses(
        (status = 200, description = "The endpoint is deleted.", body = WebhookDeleted),
        (status = 404, description = "No such tenant, or no such endpoint of it (`webhook_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn delete(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<Json<WebhookDeleted>, CoreError> {
    let owner = owner(&app, &tenant).await?;
    Ok(Json(service::delete(&app, owner, &id).await?))
}

/// Give a tenant-wide webhook endpoint a new signing secret; the old ones keep signing for
/// `overlapHours` (default 24). The new secret is in the answer and never shown again.
#[utoipa::path(
    post,
    path = "/core/v1/tenants/{tenant_id}/webhooks/{endpoint_id}/rotate_secret",
    tag = "core",
    operation_id = "core-tenant-webhooks-rotate-secret",
    params(
        ("tenant_id" = String, Path, description = "The tenant's id."),
        ("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`)."),
    ),
    request_body = RotateSecret,
    responses(
        (status = 200, description = "The endpoint, with its new secret (shown once).", body = WebhookWithSecret),
        (status = 400, description = "The body is invalid (`param` names the field).", body = ErrorEnvelope),
        (status = 404, description = "No such tenant, or no such endpoint of it (`webhook_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The endpoint kept changing meanwhile (`concurrent_update`); try again.", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or webhooks are not configured; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn rotate_secret(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path((tenant, id)): Path<(String, String)>,
    Wire(body, _): Wire<RotateSecret, CoreError>,
) -> Result<Json<WebhookWithSecret>, CoreError> {
    let owner = owner(&app, &tenant).await?;
    Ok(Json(service::rotate_secret(&app, owner, &id, body).await?))
}

/// Send a `webhook.test` event to the tenant-wide endpoint now and answer the attempt.
#[utoipa::path(
    post,
    path = "/core/v1/tenants/{tenant_id}/webhooks/{endpoint_id}/test",
    tag = "core",
    operation_id = "core-tenant-webhooks-test",
    params(
        ("tenant_id" = String, Path, description = "The tenant's id."),
        ("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`)."),
    ),
    responses(
        (status = 200, description = "The attempt (its `statusCode` is the receiver's answer).", body = AttemptBody),
        (status = 404, description = "No such tenant, or no such endpoint of it (`webhook_not_found`).", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or webhooks are not configured; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn test(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<Json<AttemptBody>, CoreError> {
    let owner = owner(&app, &tenant).await?;
    Ok(Json(service::test(&app, owner, &id).await?))
}

/// The tenant-wide endpoint's newest messages, each with its attempts.
#[utoipa::path(
    get,
    path = "/core/v1/tenants/{tenant_id}/webhooks/{endpoint_id}/messages",
    tag = "core",
    operation_id = "core-tenant-webhooks-messages",
    params(
        ("tenant_id" = String, Path, description = "The tenant's id."),
        ("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`)."),
        MessageParams,
    ),
    responses(
        (status = 200, description = "The newest messages, newest first.", body = MessageList),
        (status = 400, description = "`limit` is invalid.", body = ErrorEnvelope),
        (status = 404, description = "No such tenant, or no such endpoint of it (`webhook_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn messages(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path((tenant, id)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Json<MessageList>, CoreError> {
    let owner = owner(&app, &tenant).await?;
    Ok(Json(service::messages(&app, owner, &id, raw.as_deref()).await?))
}

/// Send a message of the tenant-wide endpoint again now, with the same `evt_` id.
#[utoipa::path(
    post,
    path = "/core/v1/tenants/{tenant_id}/webhooks/{endpoint_id}/messages/{message_id}/redeliver",
    tag = "core",
    operation_id = "core-tenant-webhooks-redeliver",
    params(
        ("tenant_id" = String, Path, description = "The tenant's id."),
        ("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`)."),
        ("message_id" = String, Path, description = "The message's id (`evt_…`)."),
    ),
    responses(
        (status = 200, description = "The new attempt.", body = AttemptBody),
        (status = 404, description = "No such tenant, endpoint (`webhook_not_found`) or message (`webhook_message_not_found`).", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or webhooks are not configured; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn redeliver(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path((tenant, id, message_id)): Path<(String, String, String)>,
) -> Result<Json<AttemptBody>, CoreError> {
    let owner = owner(&app, &tenant).await?;
    Ok(Json(service::redeliver(&app, owner, &id, &message_id).await?))
}
