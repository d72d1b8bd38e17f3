//! Managing the webhook endpoints of one owner (a project or a tenant): what each route does
//! once its surface authenticated the caller and named the owner.

use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_domain::webhook::signature::SigningSecret;
use agentplane_domain::webhook::{
    self, DEFAULT_OVERLAP_HOURS, Endpoint, EndpointFields, EndpointId, MAX_OVERLAP_HOURS, Message, MessageId,
    MessageStatus, Owner, StoredSecret, TEST_EVENT_TYPE,
};
use agentplane_domain::{ProjectId, Timestamp, ValidationError};
use agentplane_engine::webhooks::reach;
use agentplane_engine::webhooks::{SealKey, attempt};
use agentplane_store::StoreError;
use serde_json::json;

use super::WebhookError;
use super::wire::{
    AttemptBody, CallbackSecret, CreateWebhook, MessageBody, MessageList, RotateSecret, UpdateWebhook,
    WebhookBody, WebhookDeleted, WebhookWithSecret,
};
use crate::list::List;
use crate::{App, edge};

fn endpoint_id(text: &str) -> Result<EndpointId, WebhookError> {
    text.parse().map_err(|_| WebhookError::NotFound)
}

fn key(app: &App) -> Result<&SealKey, WebhookError> {
    app.webhooks.key.as_deref().ok_or(WebhookError::Unavailable)
}

fn not_found(err: StoreError, what: WebhookError) -> WebhookError {
    match err {
        StoreError::NotFound => what,
        other => other.into(),
    }
}

/// A fresh `whsec_` secret: its text (shown once) and its sealed form for `id`.
fn new_secret(app: &App, id: &EndpointId, now: Timestamp) -> Result<(String, StoredSecret), WebhookError> {
    let text = SigningSecret::from_random(edge::random()?).expose();
    let sealed =
        key(app)?.seal(id.as_str(), text.as_bytes()).map_err(|e| WebhookError::Internal(e.to_string()))?;
    Ok((text, StoredSecret { sealed, created_at: now, expires_at: None }))
}

/// Refuses a URL whose host is or resolves to an address deliveries may not reach (checked
/// again at every delivery), naming the parameter `param` that gave it (see
/// [`agentplane_engine::webhooks::reach`]).
pub(crate) async fn check_reachable(app: &App, param: &'static str, url: &str) -> Result<(), WebhookError> {
    Ok(reach::check_reachable(&app.webhooks, param, url).await?)
}

pub async fn create(app: &App, owner: Owner, body: CreateWebhook) -> Result<WebhookWithSecret, WebhookError> {
    let now = edge::now();
    let id = EndpointId::from_random(edge::random()?);
    let (secret, stored) = new_secret(app, &id, now)?;
    let endpoint = webhook::new_endpoint(EndpointFields::from(body), id, owner, stored, now)?;
    check_reachable(app, "url", &endpoint.url).await?;
    match app.store.webhooks().create(&endpoint).await {
        Ok(()) => Ok(WebhookWithSecret { endpoint: WebhookBody::from(&endpoint), secret }),
        Err(StoreError::Conflict) => Err(WebhookError::LimitReached),
        Err(err) => Err(err.into()),
    }
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
    let endpoint = app
        .store
        .webhooks()
        .get(&owner, &endpoint_id(id)?)
        .await
        .map_err(|e| not_found(e, WebhookError::NotFound))?;
    // The callback signer is no endpoint to manage (its secret rotates by its own route).
    if endpoint.callback {
        return Err(WebhookError::NotFound);
    }
    Ok(endpoint)
}

/// Reads the endpoint, changes it with `change` (given a time after its last change) and
/// writes it back only if nobody wrote it meanwhile; read again up to five times, then 409
/// `concurrent_update`.
async fn edit<T>(
    app: &App,
    owner: Owner,
    id: &str,
    mut change: impl FnMut(&mut Endpoint, Timestamp) -> Result<T, WebhookError>,
) -> Result<(Endpoint, T), WebhookError> {
    for _ in 0..5 {
        let mut endpoint = load(app, owner, id).await?;
        let previous = endpoint.updated_at;
        let out = change(&mut endpoint, edge::now().max(previous.plus_millis(1)))?;
        match app.store.webhooks().replace(&endpoint, previous).await {
            Ok(()) => return Ok((endpoint, out)),
            Err(StoreError::Conflict) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(WebhookError::ConcurrentUpdate)
}

pub async fn update(
    app: &App,
    owner: Owner,
    id: &str,
    body: UpdateWebhook,
) -> Result<WebhookBody, WebhookError> {
    let fields = EndpointFields::from(body);
    if let Some(url) = &fields.url {
        webhook::check_url(url)?;
        check_reachable(app, "url", url).await?;
    }
    let (endpoint, ()) =
        edit(app, owner, id, |endpoint, now| Ok(webhook::patch_endpoint(endpoint, fields.clone(), now)?))
            .await?;
    Ok(WebhookBody::from(&endpoint))
}

pub async fn delete(app: &App, owner: Owner, id: &str) -> Result<WebhookDeleted, WebhookError> {
    let id = load(app, owner, id).await?.id;
    app.store.webhooks().delete(&owner, &id).await.map_err(|e| not_found(e, WebhookError::NotFound))?;
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
    let (endpoint, secret) = edit(app, owner, id, |endpoint, now| {
        let (secret, stored) = new_secret(app, &endpoint.id, now)?;
        endpoint.rotate(stored.sealed, overlap, now);
        Ok(secret)
    })
    .await?;
    Ok(WebhookWithSecret { endpoint: WebhookBody::from(&endpoint), secret })
}

/// Sends a `webhook.test` event to the endpoint now and answers the attempt (recorded like any
/// other; a failed test is retried on the usual schedule).
pub async fn test(app: &App, owner: Owner, id: &str) -> Result<AttemptBody, WebhookError> {
    let endpoint = load(app, owner, id).await?;
    let now = edge::now();
    let data = json!({ "endpointId": endpoint.id.to_string() });
    let mut message = Message {
        id: MessageId::from_random(edge::random()?),
        owner: endpoint.owner,
        endpoint_id: endpoint.id.clone(),
        event_type: TEST_EVENT_TYPE.to_owned(),
        payload: webhook::payload(TEST_EVENT_TYPE, &data, now),
        url: None,
        status: MessageStatus::Pending,
        attempts: 0,
        next_attempt_at: None,
        created_at: now,
    };
    app.store.webhooks().put_message(&message).await?;
    let attempt = attempt(&app.store, &app.webhooks, &endpoint, &mut message).await?;
    Ok(AttemptBody::from(&attempt))
}

/// Sends a message again now, with the same `evt_` id; answers the new attempt.
pub async fn redeliver(
    app: &App,
    owner: Owner,
    id: &str,
    message_id: &str,
) -> Result<AttemptBody, WebhookError> {
    let endpoint = load(app, owner, id).await?;
    let message_id: MessageId = message_id.parse().map_err(|_| WebhookError::MessageNotFound)?;
    let mut message = app
        .store
        .webhooks()
        .message(&endpoint.id, &message_id)
        .await
        .map_err(|e| not_found(e, WebhookError::MessageNotFound))?;
    let attempt = attempt(&app.store, &app.webhooks, &endpoint, &mut message).await?;
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

/// Before a background run with a callback is queued: its URL may be reached (as an endpoint's
/// would), and the project has a callback signer (made now with a first secret, if it has
/// none). The first secret, when this call made it: the answer shows it, the only time it is
/// shown (a later one is read by rotating it, see [`rotate_callback_secret`]).
pub async fn prepare_callback(
    app: &App,
    project: ProjectId,
    url: &str,
) -> Result<Option<String>, WebhookError> {
    check_reachable(app, "callback_url", url).await?;
    let now = edge::now();
    let id = webhook::callback_signer_id(&project);
    let (secret, stored) = new_secret(app, &id, now)?;
    let made =
        app.store.webhooks().ensure_callback_signer(&webhook::callback_signer(project, stored, now)).await?;
    Ok(made.then_some(secret))
}

/// Gives the project's callback signer a new secret (making the signer if it has none) and
/// answers it, the only time it is shown; the secrets signing until now keep signing for the
/// overlap.
pub async fn rotate_callback_secret(
    app: &App,
    project: ProjectId,
    body: RotateSecret,
) -> Result<CallbackSecret, WebhookError> {
    let overlap = overlap_hours(&body)?;
    let id = webhook::callback_signer_id(&project);
    for _ in 0..5 {
        let now = edge::now();
        let (secret, stored) = new_secret(app, &id, now)?;
        let mut signer = match app.store.webhooks().get(&Owner::Project(project), &id).await {
            Ok(signer) => signer,
            Err(StoreError::NotFound) => {
                let signer = webhook::callback_signer(project, stored.clone(), now);
                app.store.webhooks().ensure_callback_signer(&signer).await?;
                app.store.webhooks().get(&Owner::Project(project), &id).await?
            }
            Err(err) => return Err(err.into()),
        };
        if signer.secrets.iter().any(|s| s.sealed == stored.sealed) {
            return Ok(CallbackSecret { object: "callback_secret", secret, rotated_at: now.unix_seconds() });
        }
        let previous = signer.updated_at;
        let at = now.max(previous.plus_millis(1));
        signer.rotate(stored.sealed, overlap, at);
        match app.store.webhooks().replace(&signer, previous).await {
            Ok(()) => {
                return Ok(CallbackSecret {
                    object: "callback_secret",
                    secret,
                    rotated_at: at.unix_seconds(),
                });
            }
            Err(StoreError::Conflict) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(WebhookError::ConcurrentUpdate)
}
