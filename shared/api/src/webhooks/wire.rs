//! The webhook routes' wire. Unlike the rest of the client API, webhook objects are camelCase
//! (as Standard Webhooks receivers expect); times are Unix seconds.

use agentplane_domain::webhook::{Attempt, Endpoint, EndpointFields, Message, MessageStatus, Owner};
use agentplane_store::MessageWithAttempts;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// A new endpoint.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateWebhook {
    /// `http` or `https`, no user name or password, at most 2048 characters. Hosts that are or
    /// resolve to loopback, private, link-local or metadata addresses are refused
    /// (`url_not_allowed`) unless the deployment allows them.
    #[schema(max_length = 2048)]
    pub url: String,
    /// The event types to receive; absent or empty: every type.
    #[serde(default)]
    #[schema(nullable = false)]
    pub event_types: Option<Vec<String>>,
    #[serde(default)]
    #[schema(nullable = false, max_length = 1024)]
    pub description: Option<String>,
    /// Default `true`.
    #[serde(default)]
    #[schema(nullable = false)]
    pub enabled: Option<bool>,
}

impl From<CreateWebhook> for EndpointFields {
    fn from(body: CreateWebhook) -> Self {
        Self {
            url: Some(body.url),
            event_types: body.event_types,
            description: body.description,
            enabled: body.enabled,
        }
    }
}

/// A change to an endpoint: only the fields given change.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpdateWebhook {
    #[serde(default)]
    #[schema(nullable = false, max_length = 2048)]
    pub url: Option<String>,
    /// Replaces the list; empty: every type.
    #[serde(default)]
    #[schema(nullable = false)]
    pub event_types: Option<Vec<String>>,
    #[serde(default)]
    #[schema(nullable = false, max_length = 1024)]
    pub description: Option<String>,
    /// `true` turns a disabled endpoint (also one a `410 Gone` disabled) back on.
    #[serde(default)]
    #[schema(nullable = false)]
    pub enabled: Option<bool>,
}

impl From<UpdateWebhook> for EndpointFields {
    fn from(body: UpdateWebhook) -> Self {
        Self {
            url: body.url,
            event_types: body.event_types,
            description: body.description,
            enabled: body.enabled,
        }
    }
}

/// A secret rotation.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RotateSecret {
    /// How long the secrets signing until now keep signing beside the new one, 0 to 168 hours
    /// (default 24).
    #[serde(default)]
    #[schema(nullable = false, minimum = 0, maximum = 168)]
    pub overlap_hours: Option<u32>,
}

/// An endpoint as the client API shows it; never its secrets.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WebhookEndpoint)]
pub struct WebhookBody {
    /// `ep_` and 24 hex characters.
    pub id: String,
    /// Always `webhook_endpoint`.
    #[schema(value_type = String, pattern = "^webhook_endpoint$")]
    pub object: &'static str,
    /// The project the endpoint belongs to (absent for a tenant-wide endpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub project_id: Option<String>,
    /// The tenant a tenant-wide endpoint belongs to (absent for a project's endpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub tenant_id: Option<String>,
    pub url: String,
    /// Empty: every type.
    pub event_types: Vec<String>,
    pub description: String,
    pub enabled: bool,
    /// Why a delivery disabled the endpoint (a `410 Gone`), if one did.
    pub disabled_reason: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub updated_at: i64,
}

impl From<&Endpoint> for WebhookBody {
    fn from(e: &Endpoint) -> Self {
        Self {
            id: e.id.to_string(),
            object: "webhook_endpoint",
            project_id: match &e.owner {
                Owner::Project(p) => Some(p.to_string()),
                Owner::Tenant(_) => None,
            },
            tenant_id: match &e.owner {
                Owner::Tenant(t) => Some(t.to_string()),
                Owner::Project(_) => None,
            },
            url: e.url.clone(),
            event_types: e.event_types.clone(),
            description: e.description.clone(),
            enabled: e.enabled,
            disabled_reason: e.disabled_reason.clone(),
            created_at: e.created_at.unix_seconds(),
            updated_at: e.updated_at.unix_seconds(),
        }
    }
}

/// An endpoint with its new signing secret: the only time the secret is shown.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WebhookEndpointWithSecret)]
pub struct WebhookWithSecret {
    #[serde(flatten)]
    pub endpoint: WebhookBody,
    /// `whsec_` and base64 of 32 bytes: the Standard Webhooks signing secret.
    pub secret: String,
}

/// The endpoint is deleted.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WebhookEndpointDeleted)]
pub struct WebhookDeleted {
    pub id: String,
    /// Always `webhook_endpoint.deleted`.
    #[schema(value_type = String, pattern = "^webhook_endpoint\\.deleted$")]
    pub object: &'static str,
    /// Always `true`.
    pub deleted: bool,
}

/// One delivery attempt. The receiver's answer is kept only as a short excerpt.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WebhookAttempt)]
pub struct AttemptBody {
    /// 1 for the first attempt.
    pub number: u32,
    /// Unix seconds.
    pub at: i64,
    /// The receiver's HTTP status; `null` when none came (timeout, refused, unreachable).
    pub status_code: Option<u16>,
    pub duration_ms: u64,
    pub error: Option<String>,
    /// At most 256 bytes of the receiver's answer.
    pub response_excerpt: Option<String>,
}

impl From<&Attempt> for AttemptBody {
    fn from(a: &Attempt) -> Self {
        Self {
            number: a.number,
            at: a.at.unix_seconds(),
            status_code: a.status_code,
            duration_ms: a.duration_ms,
            error: a.error.clone(),
            response_excerpt: a.response_excerpt.clone(),
        }
    }
}

/// Where a message stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = WebhookMessageStatus)]
pub enum MessageStatusName {
    Pending,
    Succeeded,
    Failed,
}

/// One event sent to the endpoint, with its attempts.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WebhookMessage)]
pub struct MessageBody {
    /// `evt_` and 24 hex characters: the `webhook-id` header, the same on every attempt.
    pub id: String,
    pub event_type: String,
    /// The body sent: `{type, timestamp, data}`.
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    pub status: MessageStatusName,
    /// Unix seconds of the next attempt, while one is due.
    pub next_attempt_at: Option<i64>,
    /// Unix seconds.
    pub created_at: i64,
    pub attempts: Vec<AttemptBody>,
}

impl MessageBody {
    pub fn of(message: &Message, attempts: &[Attempt]) -> Self {
        Self {
            id: message.id.to_string(),
            event_type: message.event_type.clone(),
            payload: serde_json::from_str(&message.payload).unwrap_or(serde_json::Value::Null),
            status: match message.status {
                MessageStatus::Pending => MessageStatusName::Pending,
                MessageStatus::Succeeded => MessageStatusName::Succeeded,
                MessageStatus::Failed => MessageStatusName::Failed,
            },
            next_attempt_at: message.next_attempt_at.map(|t| t.unix_seconds()),
            created_at: message.created_at.unix_seconds(),
            attempts: attempts.iter().map(AttemptBody::from).collect(),
        }
    }
}

impl From<&MessageWithAttempts> for MessageBody {
    fn from(m: &MessageWithAttempts) -> Self {
        Self::of(&m.message, &m.attempts)
    }
}

/// The endpoint's newest messages.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WebhookMessageList)]
pub struct MessageList {
    /// Always `list`.
    #[schema(value_type = String, pattern = "^list$")]
    pub object: &'static str,
    /// Newest first.
    pub data: Vec<MessageBody>,
}

/// `limit` of the messages list.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct MessageParams {
    /// How many of the newest messages, 1 to 100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u16>,
}

/// The project's callback signing secret, just rotated: the only time it is shown.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallbackSecret {
    /// Always `callback_secret`.
    #[schema(value_type = String, pattern = "^callback_secret$")]
    pub object: &'static str,
    /// `whsec_` and base64 of 32 bytes: background-run callbacks are signed with it (Standard
    /// Webhooks), beside the secrets before it for the overlap.
    pub secret: String,
    /// Unix seconds.
    pub rotated_at: i64,
}
