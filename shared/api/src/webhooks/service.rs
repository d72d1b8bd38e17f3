//! Managing the webhook endpoints of one owner (a project or a tenant), for both surfaces that
//! offer it: each call parses what the route was given, calls the engine's use case
//! ([`agentplane_engine::webhooks::endpoints`]) and renders its answer.

use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_domain::webhook::{
    DEFAULT_OVERLAP_HOURS, Endpoint, EndpointFields, EndpointId, MAX_OVERLAP_HOURS, MessageId, Owner,
};
use agentplane_domain::{ProjectId, ValidationError};
use agentplane_engine::webhooks::endpoints::{Endpoints, WithSecret};
use agentplane_store::{Store, StoreError};

use super::WebhookError;
use super::wire::{
    AttemptBody, CallbackSecret, CreateWebhook, MessageBody, MessageList, RotateSecret, UpdateWebhook,
    WebhookBody, WebhookDeleted, WebhookWithSecret,
};
use crate::App;
use crate::list::List;

fn endpoint_id(text: &str) -> Result<EndpointId, WebhookError> {
    text.parse().map_err(|_| WebhookError::NotFound)
}

fn not_found(err: StoreError, what: WebhookError) -> WebhookError {
    match err {
        StoreError::NotFound => what,
        other => other.into(),
    }
}

/// The endpoints of the deployment's store, under its webhook settings.
pub(crate) fn endpoints(app: &App) -> Endpoints<'_, Store> {
    Endpoints { store: &app.store, config: &app.webhooks, max_per_project: app.caps.webhook_endpoints }
}

fn with_secret(made: WithSecret<Endpoint>) -> WebhookWithSecret {
    WebhookWithSecret { endpoint: WebhookBody::from(&made.endpoint), secret: made.secret }
}

pub async fn create(app: &App, owner: Owner, body: CreateWebhook) -> Result<WebhookWithSecret, WebhookError> {
    Ok(with_secret(endpoints(app).create(owner, EndpointFields::from(body)).await?))
}

pub async fn list(
    app: &App,
    owner: Owner,
    raw_query: Option<&str>,
) -> Result<List<WebhookBody>, WebhookError> {
    let page = PageRequest::from_query(&Query::parse(raw_query))?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<EndpointId>().map_err(|_| WebhookError::CursorNotFound)?),
        None => None,
    };
    let found = app
        .store
        .webhooks()
        .list(&owner, &page, after.as_ref())
        .await
        .map_err(|e| not_found(e, WebhookError::CursorNotFound))?;
    Ok(List::of(&found, |e| WebhookBody::from(e), |e| e.id.to_string()))
}

/// The endpoint `id` of `owner`.
pub async fn load(app: &App, owner: Owner, id: &str) -> Result<Endpoint, WebhookError> {
    Ok(endpoints(app).load(owner, &endpoint_id(id)?).await?)
}

pub async fn update(
    app: &App,
    owner: Owner,
    id: &str,
    body: UpdateWebhook,
) -> Result<WebhookBody, WebhookError> {
    let endpoint = endpoints(app).update(owner, &endpoint_id(id)?, EndpointFields::from(body)).await?;
    Ok(WebhookBody::from(&endpoint))
}

pub async fn delete(app: &App, owner: Owner, id: &str) -> Result<WebhookDeleted, WebhookError> {
    let id = endpoints(app).delete(owner, &endpoint_id(id)?).await?;
    Ok(WebhookDeleted { id: id.to_string(), object: "webhook_endpoint.deleted", deleted: true })
}

fn overlap_hours(body: &RotateSecret) -> Result<u32, WebhookError> {
    let overlap = body.overlap_hours.unwrap_or(DEFAULT_OVERLAP_HOURS);
    if overlap > MAX_OVERLAP_HOURS {
        return Err(ValidationError::new(
            "overlapHours",
            format!("`overlapHours` must be from 0 to {MAX_OVERLAP_HOURS}"),
        )
        .into());
    }
    Ok(overlap)
}

pub async fn rotate_secret(
    app: &App,
    owner: Owner,
    id: &str,
    body: RotateSecret,
) -> Result<WebhookWithSecret, WebhookError> {
    let overlap = overlap_hours(&body)?;
    Ok(with_secret(endpoints(app).rotate_secret(owner, &endpoint_id(id)?, overlap).await?))
}

/// Sends a `webhook.test` event to the endpoint now and answers the attempt (recorded like any
/// other; a failed test is retried on the usual schedule).
pub async fn test(app: &App, owner: Owner, id: &str) -> Result<AttemptBody, WebhookError> {
    let attempt = endpoints(app).test(owner, &endpoint_id(id)?).await?;
    Ok(AttemptBody::from(&attempt))
}

/// Sends a message again now, with the same `evt_` id; answers the new attempt.
pub async fn redeliver(
    app: &App,
    owner: Owner,
    id: &str,
    message_id: &str,
) -> Result<AttemptBody, WebhookError> {
    let id = endpoint_id(id)?;
    let message_id: MessageId = message_id.parse().map_err(|_| WebhookError::MessageNotFound)?;
    let attempt = endpoints(app).redeliver(owner, &id, &message_id).await?;
    Ok(AttemptBody::from(&attempt))
}

/// The endpoint's newest messages, each with its attempts.
pub async fn messages(
    app: &App,
    owner: Owner,
    id: &str,
    raw_query: Option<&str>,
) -> Result<MessageList, WebhookError> {
    let page = PageRequest::from_query(&Query::parse(raw_query))?;
    let endpoint = load(app, owner, id).await?;
    let found = app.store.webhooks().messages(&endpoint.id, page.limit).await?;
    Ok(MessageList { object: "list", data: found.iter().map(MessageBody::from).collect() })
}

/// Gives the project's callback signer a new secret (making the signer if it has none) and
/// answers it, the only time it is shown.
pub async fn rotate_callback_secret(
    app: &App,
    project: ProjectId,
    body: RotateSecret,
) -> Result<CallbackSecret, WebhookError> {
    let overlap = overlap_hours(&body)?;
    let (secret, rotated_at) = endpoints(app).rotate_callback_secret(project, overlap).await?;
    Ok(CallbackSecret { object: "callback_secret", secret, rotated_at: rotated_at.unix_seconds() })
}
