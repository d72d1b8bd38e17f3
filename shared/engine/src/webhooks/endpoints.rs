//! Managing the webhook endpoints of one owner (a project or a tenant), once its surface has
//! authenticated the caller and named the owner: create, change, delete, rotate a secret, send
//! a test or a message again; and a project's callback signer for background runs. A change is
//! written only over the endpoint as read (read again up to five times). Secrets are made here,
//! sealed with the deployment's key, and shown once: the answer of the call that made them.

use agentplane_domain::webhook::signature::SigningSecret;
use agentplane_domain::webhook::{
    self, Attempt, Endpoint, EndpointFields, EndpointId, Message, MessageId, MessageStatus, Owner,
    StoredSecret, TEST_EVENT_TYPE,
};
use agentplane_domain::{ProjectId, Timestamp, ValidationError};
use serde_json::json;

use super::reach::{Unreachable, check_reachable};
use super::{SendError, WebhookConfig, attempt};
use crate::ports::PortError;
use crate::ports::webhooks::WebhookEndpoints;

/// Attempts at a change before it is given up as `ConcurrentUpdate`.
const ATTEMPTS: usize = 5;

/// Why a call on an endpoint failed.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// No such endpoint of this owner (the callback signer is none to manage either).
    #[error("webhook endpoint not found")]
    NotFound,
    #[error("webhook message not found")]
    MessageNotFound,
    /// The owner has as many endpoints as it may.
    #[error("webhook endpoint limit reached")]
    LimitReached,
    /// Somebody changed the endpoint at every attempt.
    #[error("the endpoint changed meanwhile")]
    ConcurrentUpdate,
    /// The deployment has no key to seal secrets with.
    #[error("webhooks are not configured (no secret key)")]
    NoKey,
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    /// A secret could not be made or sealed.
    #[error("{0}")]
    Secret(String),
    /// The attempt could not be made or recorded.
    #[error(transparent)]
    Send(#[from] SendError),
    #[error(transparent)]
    Port(PortError),
}

fn or(err: PortError, missing: EndpointError) -> EndpointError {
    match err {
        PortError::NotFound => missing,
        other => EndpointError::Port(other),
    }
}

/// The endpoints of the deployment's store, under its webhook settings.
pub struct Endpoints<'a, S> {
    pub store: &'a S,
    pub config: &'a WebhookConfig,
    /// The most endpoints one project may have (`AGENTPLANE_MAX_WEBHOOK_ENDPOINTS_PER_PROJECT`;
    /// the tenant's cap of [`webhook::MAX_ENDPOINTS`] holds as well).
    pub max_per_project: u32,
}

/// A new endpoint and its first secret, shown this once.
pub struct WithSecret<T> {
    pub endpoint: T,
    pub secret: String,
}

impl<S: WebhookEndpoints> Endpoints<'_, S> {
    /// A fresh `whsec_` secret: its text (shown once) and its sealed form for `id`.
    fn new_secret(&self, id: &EndpointId, now: Timestamp) -> Result<(String, StoredSecret), EndpointError> {
        let random = crate::random::secret().map_err(|_| EndpointError::Secret("randomness".to_owned()))?;
        let text = SigningSecret::from_random(random).expose();
        let key = self.config.key.as_deref().ok_or(EndpointError::NoKey)?;
        let sealed =
            key.seal(id.as_str(), text.as_bytes()).map_err(|e| EndpointError::Secret(e.to_string()))?;
        Ok((text, StoredSecret { sealed, created_at: now, expires_at: None }))
    }

    /// Makes an endpoint of `owner` from `fields`, its URL checked as deliveries would be.
    pub async fn create(
        &self,
        owner: Owner,
        fields: EndpointFields,
    ) -> Result<WithSecret<Endpoint>, EndpointError> {
        let now = crate::now();
        let random = crate::random::secret().map_err(|_| EndpointError::Secret("randomness".to_owned()))?;
        let id = EndpointId::from_random(random);
        let (secret, stored) = self.new_secret(&id, now)?;
        let endpoint = webhook::new_endpoint(fields, id, owner, stored, now)?;
        check_reachable(self.config, "url", &endpoint.url).await?;
        match self.store.create_endpoint(&endpoint, self.max_per_project).await {
            Ok(()) => Ok(WithSecret { endpoint, secret }),
            Err(PortError::Conflict) => Err(EndpointError::LimitReached),
            Err(err) => Err(EndpointError::Port(err)),
        }
    }

    /// The endpoint `id` of `owner` (never the callback signer, whose secret rotates by its own
    /// route).
    pub async fn load(&self, owner: Owner, id: &EndpointId) -> Result<Endpoint, EndpointError> {
        let endpoint = self.store.endpoint(&owner, id).await.map_err(|e| or(e, EndpointError::NotFound))?;
        if endpoint.callback {
            return Err(EndpointError::NotFound);
        }
        Ok(endpoint)
    }

    /// Reads the endpoint, changes it with `change` (given a time after its last change) and
    /// writes it back only if nobody wrote it meanwhile.
    async fn edit<T>(
        &self,
        owner: Owner,
        id: &EndpointId,
        mut change: impl FnMut(&mut Endpoint, Timestamp) -> Result<T, EndpointError>,
    ) -> Result<(Endpoint, T), EndpointError> {
        for _ in 0..ATTEMPTS {
            let mut endpoint = self.load(owner, id).await?;
            let previous = endpoint.updated_at;
            let out = change(&mut endpoint, crate::now().max(previous.plus_millis(1)))?;
            match self.store.replace_endpoint(&endpoint, previous).await {
                Ok(()) => return Ok((endpoint, out)),
                Err(PortError::Conflict) => continue,
                Err(err) => return Err(EndpointError::Port(err)),
            }
        }
        Err(EndpointError::ConcurrentUpdate)
    }

    /// Changes the fields `fields` names; a new URL is checked as deliveries would check it.
    pub async fn update(
        &self,
        owner: Owner,
        id: &EndpointId,
        fields: EndpointFields,
    ) -> Result<Endpoint, EndpointError> {
        if let Some(url) = &fields.url {
            webhook::check_url(url)?;
            check_reachable(self.config, "url", url).await?;
        }
        let (endpoint, ()) = self
            .edit(owner, id, |endpoint, now| Ok(webhook::patch_endpoint(endpoint, fields.clone(), now)?))
            .await?;
        Ok(endpoint)
    }

    /// Deletes the endpoint; the id it had.
    pub async fn delete(&self, owner: Owner, id: &EndpointId) -> Result<EndpointId, EndpointError> {
        let id = self.load(owner, id).await?.id;
        self.store.delete_endpoint(&owner, &id).await.map_err(|e| or(e, EndpointError::NotFound))?;
        Ok(id)
    }

    /// Gives the endpoint a new secret; the ones signing until now keep signing for
    /// `overlap_hours`.
    pub async fn rotate_secret(
        &self,
        owner: Owner,
        id: &EndpointId,
        overlap_hours: u32,
    ) -> Result<WithSecret<Endpoint>, EndpointError> {
        let (endpoint, secret) = self
            .edit(owner, id, |endpoint, now| {
                let (secret, stored) = self.new_secret(&endpoint.id, now)?;
                endpoint.rotate(stored.sealed, overlap_hours, now);
                Ok(secret)
            })
            .await?;
        Ok(WithSecret { endpoint, secret })
    }

    /// Sends a `webhook.test` event to the endpoint now; the attempt (recorded like any other:
    /// a failed test is retried on the usual schedule).
    pub async fn test(&self, owner: Owner, id: &EndpointId) -> Result<Attempt, EndpointError> {
        let endpoint = self.load(owner, id).await?;
        let now = crate::now();
        let data = json!({ "endpointId": endpoint.id.to_string() });
        let random = crate::random::secret().map_err(|_| EndpointError::Secret("randomness".to_owned()))?;
        let mut message = Message {
            id: MessageId::from_random(random),
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
        self.store.put_message(&message).await.map_err(EndpointError::Port)?;
        Ok(attempt(self.store, self.config, &endpoint, &mut message).await?)
    }

    /// Sends the message `message_id` again now, with the same `evt_` id; the new attempt.
    pub async fn redeliver(
        &self,
        owner: Owner,
        id: &EndpointId,
        message_id: &MessageId,
    ) -> Result<Attempt, EndpointError> {
        let endpoint = self.load(owner, id).await?;
        let mut message = self
            .store
            .message(&endpoint.id, message_id)
            .await
            .map_err(|e| or(e, EndpointError::MessageNotFound))?;
        Ok(attempt(self.store, self.config, &endpoint, &mut message).await?)
    }

    /// Before a background run with a callback is queued: its URL may be reached (as an
    /// endpoint's would), and the project has a callback signer (made now with a first secret,
    /// if it has none). The first secret, when this call made it: the only time it is shown.
    pub async fn prepare_callback(
        &self,
        project: ProjectId,
        url: &str,
    ) -> Result<Option<String>, EndpointError> {
        check_reachable(self.config, "callback_url", url).await?;
        let now = crate::now();
        let id = webhook::callback_signer_id(&project);
        let (secret, stored) = self.new_secret(&id, now)?;
        let made = self
            .store
            .ensure_callback_signer(&webhook::callback_signer(project, stored, now))
            .await
            .map_err(EndpointError::Port)?;
        Ok(made.then_some(secret))
    }

    /// Gives the project's callback signer a new secret (making the signer if it has none);
    /// the secret and when it was rotated. The secrets signing until now keep signing for the
    /// overlap.
    pub async fn rotate_callback_secret(
        &self,
        project: ProjectId,
        overlap_hours: u32,
    ) -> Result<(String, Timestamp), EndpointError> {
        let owner = Owner::Project(project);
        let id = webhook::callback_signer_id(&project);
        for _ in 0..ATTEMPTS {
            let now = crate::now();
            let (secret, stored) = self.new_secret(&id, now)?;
            let mut signer = match self.store.endpoint(&owner, &id).await {
                Ok(signer) => signer,
                Err(PortError::NotFound) => {
                    let signer = webhook::callback_signer(project, stored.clone(), now);
                    self.store.ensure_callback_signer(&signer).await.map_err(EndpointError::Port)?;
                    self.store.endpoint(&owner, &id).await.map_err(EndpointError::Port)?
                }
                Err(err) => return Err(EndpointError::Port(err)),
            };
            if signer.secrets.iter().any(|s| s.sealed == stored.sealed) {
                return Ok((secret, now));
            }
            let previous = signer.updated_at;
            let at = now.max(previous.plus_millis(1));
            signer.rotate(stored.sealed, overlap_hours, at);
            match self.store.replace_endpoint(&signer, previous).await {
                Ok(()) => return Ok((secret, at)),
                Err(PortError::Conflict) => continue,
                Err(err) => return Err(EndpointError::Port(err)),
            }
        }
        Err(EndpointError::ConcurrentUpdate)
    }
}
