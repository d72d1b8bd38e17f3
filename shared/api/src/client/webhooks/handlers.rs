use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_domain::webhook::signature::SigningSecret;
use agentplane_domain::webhook::{
    self, DEFAULT_OVERLAP_HOURS, Endpoint, EndpointFields, EndpointId, MAX_OVERLAP_HOURS, Message, MessageId,
    MessageStatus, StoredSecret, TEST_EVENT_TYPE,
};
use agentplane_domain::{Timestamp, ValidationError};
use agentplane_engine::webhooks::deliver::{TargetError, resolve};
use agentplane_engine::webhooks::{SealKey, SendError, attempt};
use agentplane_store::StoreError;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;
use serde_json::json;

use super::wire::{
    AttemptBody, CreateWebhook, MessageBody, MessageList, MessageParams, RotateSecret, UpdateWebhook,
    WebhookBody, WebhookDeleted, WebhookWithSecret,
};
use crate::body::Wire;
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::envelope::ErrorEnvelope;
use crate::list::{List, PageParams};
use crate::{App, edge};

fn endpoint_id(text: &str) -> Result<EndpointId, ClientError> {
    text.parse().map_err(|_| ClientError::WebhookNotFound)
}

fn key(app: &App) -> Result<&SealKey, ClientError> {
    app.webhooks.key.as_deref().ok_or(ClientError::WebhooksUnavailable)
}

/// A fresh `whsec_` secret: its text (shown once) and its sealed form for `id`.
fn new_secret(app: &App, id: &EndpointId, now: Timestamp) -> Result<(String, StoredSecret), ClientError> {
    let text = SigningSecret::from_random(edge::random()?).expose();
    let sealed =
        key(app)?.seal(id.as_str(), text.as_bytes()).map_err(|e| ClientError::internal(e.to_string()))?;
    Ok((text, StoredSecret { sealed, created_at: now, expires_at: None }))
}

/// Refuses a URL whose host is or resolves to an address deliveries may not reach (checked
/// again at every delivery). A name that does not resolve yet is accepted: its deliveries fail.
async fn check_reachable(app: &App, url: &str) -> Result<(), ClientError> {
    if app.webhooks.allow_private {
        return Ok(());
    }
    match resolve(url, false, app.webhooks.timeout).await {
        Ok(_) | Err(TargetError::Unresolvable(_)) => Ok(()),
        Err(TargetError::NotAllowed { host, reason }) => Err(ClientError::UrlNotAllowed(format!(
            "`url` points at {host}, {reason}; webhooks go to public hosts"
        ))),
        Err(TargetError::Invalid(message)) => Err(ValidationError::new("url", message).into()),
    }
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
        (status = 401, description = "No valid project key.", body = ErrorEnvelope),
        (status = 409, description = "The project has 50 endpoints already (`webhook_limit_reached`).", body = ErrorEnvelope),
        (status = 413, description = "The body is too large.", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or webhooks are not configured; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    auth: ProjectAuth,
    Wire(body, _): Wire<CreateWebhook, ClientError>,
) -> Result<(StatusCode, Json<WebhookWithSecret>), ClientError> {
    let now = edge::now();
    let id = EndpointId::from_random(edge::random()?);
    let (secret, stored) = new_secret(&app, &id, now)?;
    let endpoint = webhook::new_endpoint(EndpointFields::from(body), id, auth.project_id, stored, now)?;
    check_reachable(&app, &endpoint.url).await?;
    match app.store.webhooks().create(&endpoint).await {
        Ok(()) => {}
        Err(StoreError::Conflict) => return Err(ClientError::WebhookLimitReached),
        Err(err) => return Err(err.into()),
    }
    Ok((StatusCode::CREATED, Json(WebhookWithSecret { endpoint: WebhookBody::from(&endpoint), secret })))
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
        (status = 401, description = "No valid project key.", body = ErrorEnvelope),
        (status = 404, description = "`after` names no endpoint of this project (`cursor_not_found`).", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: ProjectAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<List<WebhookBody>>, ClientError> {
    let page = PageRequest::from_query(&Query::parse(raw.as_deref()))?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<EndpointId>().map_err(|_| ClientError::CursorNotFound)?),
        None => None,
    };
    let found = app
        .store
        .webhooks()
        .list(&auth.project_id, &page, after.as_ref())
        .await
        .or_not_found(ClientError::CursorNotFound)?;
    Ok(Json(List::of(&found, |e| WebhookBody::from(e), |e| e.id.to_string())))
}

/// Reads the endpoint, changes it with `change` (given a time after its last change) and
/// writes it back only if nobody wrote it meanwhile; read again up to five times, then 409
/// `concurrent_update`.
async fn edit<T>(
    app: &App,
    auth: &ProjectAuth,
    id: &str,
    mut change: impl FnMut(&mut Endpoint, Timestamp) -> Result<T, ClientError>,
) -> Result<(Endpoint, T), ClientError> {
    for _ in 0..5 {
        let mut endpoint = load(app, auth, id).await?;
        let previous = endpoint.updated_at;
        let out = change(&mut endpoint, edge::now().max(previous.plus_millis(1)))?;
        match app.store.webhooks().replace(&endpoint, previous).await {
            Ok(()) => return Ok((endpoint, out)),
            Err(StoreError::Conflict) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(ClientError::ConcurrentUpdate)
}

async fn load(app: &App, auth: &ProjectAuth, id: &str) -> Result<Endpoint, ClientError> {
    app.store
        .webhooks()
        .get(&auth.project_id, &endpoint_id(id)?)
        .await
        .or_not_found(ClientError::WebhookNotFound)
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
        (status = 401, description = "No valid project key.", body = ErrorEnvelope),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`).", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<WebhookBody>, ClientError> {
    Ok(Json(WebhookBody::from(&load(&app, &auth, &id).await?)))
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
        (status = 401, description = "No valid project key.", body = ErrorEnvelope),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The endpoint kept changing meanwhile (`concurrent_update`); try again.", body = ErrorEnvelope),
        (status = 413, description = "The body is too large.", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn update(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    Wire(body, _): Wire<UpdateWebhook, ClientError>,
) -> Result<Json<WebhookBody>, ClientError> {
    let fields = EndpointFields::from(body);
    if let Some(url) = &fields.url {
        webhook::check_url(url)?;
        check_reachable(&app, url).await?;
    }
    let (endpoint, ()) =
        edit(&app, &auth, &id, |endpoint, now| Ok(webhook::patch_endpoint(endpoint, fields.clone(), now)?))
            .await?;
    Ok(Json(WebhookBody::from(&endpoint)))
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
        (status = 401, description = "No valid project key.", body = ErrorEnvelope),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`).", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn delete(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<WebhookDeleted>, ClientError> {
    let id = endpoint_id(&id)?;
    app.store.webhooks().delete(&auth.project_id, &id).await.or_not_found(ClientError::WebhookNotFound)?;
    Ok(Json(WebhookDeleted { id: id.to_string(), object: "webhook_endpoint.deleted", deleted: true }))
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
        (status = 401, description = "No valid project key.", body = ErrorEnvelope),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The endpoint kept changing meanwhile (`concurrent_update`); try again.", body = ErrorEnvelope),
        (status = 413, description = "The body is too large.", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or webhooks are not configured; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn rotate_secret(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    Wire(body, _): Wire<RotateSecret, ClientError>,
) -> Result<Json<WebhookWithSecret>, ClientError> {
    let overlap = body.overlap_hours.unwrap_or(DEFAULT_OVERLAP_HOURS);
    if overlap > MAX_OVERLAP_HOURS {
        return Err(ValidationError::new(
            "overlapHours",
            format!("`overlapHours` must be from 0 to {MAX_OVERLAP_HOURS}"),
        )
        .into());
    }
    let (endpoint, secret) = edit(&app, &auth, &id, |endpoint, now| {
        let (secret, stored) = new_secret(&app, &endpoint.id, now)?;
        endpoint.rotate(stored.sealed, overlap, now);
        Ok(secret)
    })
    .await?;
    Ok(Json(WebhookWithSecret { endpoint: WebhookBody::from(&endpoint), secret }))
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
        (status = 401, description = "No valid project key.", body = ErrorEnvelope),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`).", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or webhooks are not configured; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn test(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<AttemptBody>, ClientError> {
    let endpoint = load(&app, &auth, &id).await?;
    let now = edge::now();
    let data = json!({ "endpointId": endpoint.id.to_string() });
    let mut message = Message {
        id: MessageId::from_random(edge::random()?),
        project_id: endpoint.project_id,
        endpoint_id: endpoint.id.clone(),
        event_type: TEST_EVENT_TYPE.to_owned(),
        payload: webhook::payload(TEST_EVENT_TYPE, &data, now),
        status: MessageStatus::Pending,
        attempts: 0,
        next_attempt_at: None,
        created_at: now,
    };
    app.store.webhooks().put_message(&message).await?;
    let attempt = attempt(&app.store, &app.webhooks, &endpoint, &mut message).await.map_err(send_error)?;
    Ok(Json(AttemptBody::from(&attempt)))
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
        (status = 401, description = "No valid project key.", body = ErrorEnvelope),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`), or no such message of it (`webhook_message_not_found`).", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or webhooks are not configured; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn redeliver(
    State(app): State<App>,
    auth: ProjectAuth,
    Path((id, message_id)): Path<(String, String)>,
) -> Result<Json<AttemptBody>, ClientError> {
    let endpoint = load(&app, &auth, &id).await?;
    let message_id: MessageId = message_id.parse().map_err(|_| ClientError::WebhookMessageNotFound)?;
    let mut message = app
        .store
        .webhooks()
        .message(&endpoint.id, &message_id)
        .await
        .or_not_found(ClientError::WebhookMessageNotFound)?;
    let attempt = attempt(&app.store, &app.webhooks, &endpoint, &mut message).await.map_err(send_error)?;
    Ok(Json(AttemptBody::from(&attempt)))
}

fn send_error(err: SendError) -> ClientError {
    match err {
        SendError::NoKey => ClientError::WebhooksUnavailable,
        SendError::Seal(err) => ClientError::internal(err.to_string()),
        SendError::Storage(err) => ClientError::Storage(err),
    }
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
        (status = 401, description = "No valid project key.", body = ErrorEnvelope),
        (status = 404, description = "No such endpoint in this project (`webhook_not_found`).", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn messages(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<MessageList>, ClientError> {
    let page = PageRequest::from_query(&Query::parse(raw.as_deref()))?;
    let endpoint = load(&app, &auth, &id).await?;
    let found = app.store.webhooks().messages(&endpoint.id, page.limit).await?;
    Ok(Json(MessageList { object: "list", data: found.iter().map(MessageBody::from).collect() }))
}
