//! The client API's webhook routes: a project's own endpoints. What each does is
//! `crate::webhooks::service`'s; here the project key names the owner.

use agentplane_domain::webhook::Owner;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;

use crate::App;
use crate::body::Wire;
use crate::client::auth::ProjectAuth;
use crate::client::error::ClientError;
use crate::envelope::ErrorEnvelope;
use crate::list::{List, PageParams};
use crate::webhooks::service;
use crate::webhooks::wire::{
    AttemptBody, CallbackSecret, CreateWebhook, MessageList, MessageParams, RotateSecret, UpdateWebhook,
    WebhookBody, WebhookDeleted, WebhookWithSecret,
};

fn owner(auth: &ProjectAuth) -> Owner {
    Owner::Project(auth.project_id)
}

/// Create a webhook endpoint.
///
/// The answer carries the endpoint's signing secret; it is never shown again (rotate it to get
/// a new one). A project has at most 50 endpoints.
#[utoipa::path(
    post,
    path = "/api/client/v1/webhooks",
    tag = "client",
    operation_id = "client-webhooks-create",
    request_body = CreateWebhook,
    responses(
        (status = 201, description = "The new endpoint, with its secret (shown once).", body = WebhookWithSecret),
        (status = 400, description = "The body is invalid (`param` names the field), or the URL points at a private address (`url_not_allowed`).", body = ErrorEnvelope),
        (status = 409, description = "The project's tenant (or the project alone, without one) has 50 endpoints already (`webhook_limit_reached`).", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or webhooks are not configured; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    auth: ProjectAuth,
    Wire(body, _): Wire<CreateWebhook, ClientError>,
) -> Result<(StatusCode, Json<WebhookWithSecret>), ClientError> {
    Ok((StatusCode::CREATED, Json(service::create(&app, owner(&auth), body).await?)))
}

/// List the project's webhook endpoints, newest first.
#[utoipa::path(
    get,
    path = "/api/client/v1/webhooks",
    tag = "client",
    operation_id = "client-webhooks-list",
    params(PageParams),
    responses(
        (status = 200, description = "A page of endpoints.", body = List<WebhookBody>),
        (status = 400, description = "A page parameter is invalid.", body = ErrorEnvelope),
        (status = 404, description = "`after` names no endpoint of this project (`cursor_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: ProjectAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<List<WebhookBody>>, ClientError> {
    Ok(Json(service::list(&app, owner(&auth), raw.as_deref()).await?))
}

/// Retrieve a webhook endpoint.
#[utoipa::path(
    get,
    path = "/api/client/v1/webhooks/{endpoint_id}",
    tag = "client",
    operation_id = "client-webhooks-get",
    params(("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`).")),
    responses(
        (status = 200, description = "The endpoint.", body = WebhookBody),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<WebhookBody>, ClientError> {
    Ok(Json(WebhookBody::from(&service::load(&app, owner(&auth), &id).await?)))
}

/// Change a webhook endpoint's URL, event types, description or whether it is enabled.
#[utoipa::path(
    patch,
    path = "/api/client/v1/webhooks/{endpoint_id}",
    tag = "client",
    operation_id = "client-webhooks-update",
    params(("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`).")),
    request_body = UpdateWebhook,
    responses(
        (status = 200, description = "The endpoint as changed.", body = WebhookBody),
        (status = 400, description = "The body is invalid (`param` names the field), or the URL points at a private address (`url_not_allowed`).", body = ErrorEnvelope),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The endpoint kept changing meanwhile (`concurrent_update`); try again.", body = ErrorEnvelope),
    ),
)]
pub async fn update(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    Wire(body, _): Wire<UpdateWebhook, ClientError>,
) -> Result<Json<WebhookBody>, ClientError> {
    Ok(Json(service::update(&app, owner(&auth), &id, body).await?))
}

/// Delete a webhook endpoint. Its messages are no longer sent.
#[utoipa::path(
    delete,
    path = "/api/client/v1/webhooks/{endpoint_id}",
    tag = "client",
    operation_id = "client-webhooks-delete",
    params(("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`).")),
    responses(
        (status = 200, description = "The endpoint is deleted.", body = WebhookDeleted),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn delete(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<WebhookDeleted>, ClientError> {
    Ok(Json(service::delete(&app, owner(&auth), &id).await?))
}

/// Give a webhook endpoint a new signing secret.
///
/// The secrets that signed until now keep signing beside the new one for `overlapHours`
/// (default 24), so receivers can switch without dropping a message. The new secret is in the
/// answer and never shown again.
#[utoipa::path(
    post,
    path = "/api/client/v1/webhooks/{endpoint_id}/rotate_secret",
    tag = "client",
    operation_id = "client-webhooks-rotate-secret",
    params(("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`).")),
    request_body = RotateSecret,
    responses(
        (status = 200, description = "The endpoint, with its new secret (shown once).", body = WebhookWithSecret),
        (status = 400, description = "The body is invalid (`param` names the field).", body = ErrorEnvelope),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The endpoint kept changing meanwhile (`concurrent_update`); try again.", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or webhooks are not configured; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn rotate_secret(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    Wire(body, _): Wire<RotateSecret, ClientError>,
) -> Result<Json<WebhookWithSecret>, ClientError> {
    Ok(Json(service::rotate_secret(&app, owner(&auth), &id, body).await?))
}

/// Send a `webhook.test` event to the endpoint now and answer the attempt.
///
/// The message and its attempt are recorded like any other (a failed test is retried on the
/// usual schedule once the retry job runs).
#[utoipa::path(
    post,
    path = "/api/client/v1/webhooks/{endpoint_id}/test",
    tag = "client",
    operation_id = "client-webhooks-test",
    params(("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`).")),
    responses(
        (status = 200, description = "The attempt (its `statusCode` is the receiver's answer).", body = AttemptBody),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`).", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or webhooks are not configured; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn test(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<AttemptBody>, ClientError> {
    Ok(Json(service::test(&app, owner(&auth), &id).await?))
}

/// Send a message again now, with the same `evt_` id (receivers deduplicate on it).
///
/// Answers the new attempt; the message's status follows it.
#[utoipa::path(
    post,
    path = "/api/client/v1/webhooks/{endpoint_id}/messages/{message_id}/redeliver",
    tag = "client",
    operation_id = "client-webhooks-redeliver",
    params(
        ("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`)."),
        ("message_id" = String, Path, description = "The message's id (`evt_…`)."),
    ),
    responses(
        (status = 200, description = "The new attempt.", body = AttemptBody),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`), or no such message of it (`webhook_message_not_found`).", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or webhooks are not configured; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn redeliver(
    State(app): State<App>,
    auth: ProjectAuth,
    Path((id, message_id)): Path<(String, String)>,
) -> Result<Json<AttemptBody>, ClientError> {
    Ok(Json(service::redeliver(&app, owner(&auth), &id, &message_id).await?))
}

/// The endpoint's newest messages, each with its attempts.
#[utoipa::path(
    get,
    path = "/api/client/v1/webhooks/{endpoint_id}/messages",
    tag = "client",
    operation_id = "client-webhooks-messages",
    params(("endpoint_id" = String, Path, description = "The endpoint's id (`ep_…`)."), MessageParams),
    responses(
        (status = 200, description = "The newest messages, newest first.", body = MessageList),
        (status = 400, description = "`limit` is invalid.", body = ErrorEnvelope),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn messages(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<MessageList>, ClientError> {
    Ok(Json(service::messages(&app, owner(&auth), &id, raw.as_deref()).await?))
}

/// Rotate the project's callback signing secret.
///
/// A background run's end is delivered to its `callback_url` (or the agent's
/// `default_callback_url`) as a Standard Webhooks message signed with this secret (the same
/// `agent_run.*` body and `evt_` id as the event). The project gets a secret of its own with its
/// first callback; rotating answers a new one, shown only here, and the ones before it keep
/// signing for `overlapHours` (default 24; 0 ends them now).
#[utoipa::path(
    post,
    path = "/api/client/v1/callback_secret",
    tag = "client",
    operation_id = "client-callback-secret-rotate",
    request_body = RotateSecret,
    responses(
        (status = 200, description = "The new secret (shown once).", body = CallbackSecret),
        (status = 400, description = "The body is invalid (`param` names the field).", body = ErrorEnvelope),
        (status = 409, description = "The secret kept changing meanwhile (`concurrent_update`); try again.", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or webhooks are not configured; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn rotate_callback_secret(
    State(app): State<App>,
    auth: ProjectAuth,
    Wire(body, _): Wire<RotateSecret, ClientError>,
) -> Result<Json<CallbackSecret>, ClientError> {
    Ok(Json(service::rotate_callback_secret(&app, auth.project_id, body).await?))
}
