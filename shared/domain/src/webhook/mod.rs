//! Signed webhooks (Standard Webhooks): endpoints a project registers, the messages sent to them
//! and each delivery attempt. The rules here are pure: ids, the URL and event-type checks, the
//! signature ([`signature`]), the retry schedule ([`schedule`]) and which addresses a delivery
//! may never reach ([`address`]). Sending lives in the engine, storage in the store.
//!
//! Ids: endpoints are `ep_` + 24 lowercase hex, messages (events) `evt_` + 24 lowercase hex;
//! secrets are `whsec_` + base64 of 32 random bytes (see [`signature::SigningSecret`]).

pub mod address;
pub mod events;
pub mod schedule;
pub mod signature;
pub mod targets;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ids::InvalidId;
use crate::tenant::TenantId;
use crate::{ProjectId, Timestamp, ValidationError};

/// The most endpoints a tenant may have (a project without a tenant is its own tenant).
pub const MAX_ENDPOINTS: u32 = 50;
/// The longest endpoint URL accepted.
pub const MAX_URL_CHARS: usize = 2048;
/// The longest endpoint description accepted.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// The most of a receiver's answer body kept on an attempt.
pub const MAX_EXCERPT_BYTES: usize = 256;
/// How long old secrets keep signing after a rotation, unless the caller says otherwise.
pub const DEFAULT_OVERLAP_HOURS: u32 = 24;
/// The longest overlap a rotation may ask for (one week).
pub const MAX_OVERLAP_HOURS: u32 = 168;
/// The event type of `POST …/webhooks/{id}/test`; always delivered, whatever the filter.
pub const TEST_EVENT_TYPE: &str = "webhook.test";

/// The event types an endpoint may subscribe to.
pub const EVENT_TYPES: &[&str] = &[
    "session.idled",
    "action.required",
    "budget.reached",
    "agent_run.queued",
    "agent_run.succeeded",
    "agent_run.failed",
    "agent_run.canceled",
    "agent_run.requires_action",
    "run.completed",
    "run.failed",
    "run.stopped",
    "run.reverted",
    "rollback.failed",
];

macro_rules! hex_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// From 12 random bytes (the caller owns the randomness).
            pub fn from_random(bytes: [u8; 12]) -> Self {
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                Self(format!(concat!($prefix, "{}"), hex))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = InvalidId;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let hex = s.strip_prefix($prefix).ok_or(InvalidId { kind: $kind })?;
                if hex.len() == 24 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                    Ok(Self(s.to_owned()))
                } else {
                    Err(InvalidId { kind: $kind })
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = InvalidId;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

/// For prefixed ids defined elsewhere in the crate (background runs), with the same rules.
pub(crate) use hex_id;

hex_id!(
    /// A webhook endpoint: `ep_` and 24 lowercase hex characters.
    EndpointId,
    "ep_",
    "webhook endpoint"
);
hex_id!(
    /// A webhook message (one event sent to one endpoint, the `webhook-id` header): `evt_` and
    /// 24 lowercase hex characters. Redelivery keeps it, so receivers can deduplicate.
    MessageId,
    "evt_",
    "webhook message"
);

/// A signing secret as stored: sealed with the deployment's key (never plain text), and when
/// it stops signing (`None`: the current secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSecret {
    pub sealed: String,
    pub created_at: Timestamp,
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
}

impl StoredSecret {
    /// Whether it still signs at `now`.
    pub fn signs_at(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|at| now < at)
    }
}

/// Whose endpoint it is: one project's (it receives that project's events), or a whole
/// tenant's (it receives the events of every project of the tenant). Stored as `project_id` or
/// `tenant_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Owner {
    #[serde(rename = "project_id")]
    Project(ProjectId),
    #[serde(rename = "tenant_id")]
    Tenant(TenantId),
}

impl Owner {
    /// Whether an endpoint of this owner receives the events of `project`, a project of
    /// `tenant` (if any).
    pub fn covers(&self, project: ProjectId, tenant: Option<TenantId>) -> bool {
        match self {
            Self::Project(p) => *p == project,
            Self::Tenant(t) => tenant == Some(*t),
        }
    }
}

/// An endpoint of a project or a tenant: where messages go and which event types it receives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    pub id: EndpointId,
    #[serde(flatten)]
    pub owner: Owner,
    pub url: String,
    /// Empty: every event type.
    pub event_types: Vec<String>,
    pub description: String,
    pub enabled: bool,
    /// Why the endpoint was disabled by a delivery (a `410 Gone`), if it was.
    #[serde(default)]
    pub disabled_reason: Option<String>,
    /// The current secret last; older ones sign until their `expires_at`.
    pub secrets: Vec<StoredSecret>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The project's callback signer: not an endpoint anyone manages, listed or counted, but
    /// the secrets that sign background-run callbacks (each message names its own URL).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub callback: bool,
}

/// The id of `project`'s callback signer: fixed by the project (its first 12 bytes), so a run's
/// end names it without a read.
pub fn callback_signer_id(project: &ProjectId) -> EndpointId {
    let bytes = project.as_uuid().into_bytes();
    let mut head = [0u8; 12];
    head.copy_from_slice(&bytes[..12]);
    EndpointId::from_random(head)
}

/// The project's callback signer with its first secret (`url` empty: each callback message
/// carries its own).
pub fn callback_signer(project: ProjectId, secret: StoredSecret, now: Timestamp) -> Endpoint {
    Endpoint {
        id: callback_signer_id(&project),
        owner: Owner::Project(project),
        url: String::new(),
        event_types: Vec::new(),
        description: "background-run callbacks".to_owned(),
        enabled: true,
        disabled_reason: None,
        secrets: vec![secret],
        created_at: now,
        updated_at: now,
        callback: true,
    }
}

impl Endpoint {
    /// Whether a message of `event_type` goes to this endpoint.
    pub fn receives(&self, event_type: &str) -> bool {
        self.enabled
            && (event_type == TEST_EVENT_TYPE
                || self.event_types.is_empty()
                || self.event_types.iter().any(|t| t == event_type))
    }

    /// The secrets that sign at `now`, current one first.
    pub fn signing_secrets(&self, now: Timestamp) -> Vec<&StoredSecret> {
        self.secrets.iter().rev().filter(|s| s.signs_at(now)).collect()
    }

    /// Makes `sealed` the current secret; the ones still signing keep signing for
    /// `overlap_hours` more (or until their own, earlier expiry), expired ones are dropped.
    pub fn rotate(&mut self, sealed: String, overlap_hours: u32, now: Timestamp) {
        let until = now.plus_seconds(i64::from(overlap_hours) * 3600);
        for s in &mut self.secrets {
            s.expires_at = Some(s.expires_at.map_or(until, |at| at.min(until)));
        }
        self.secrets.retain(|s| s.signs_at(now));
        self.secrets.push(StoredSecret { sealed, created_at: now, expires_at: None });
        self.updated_at = now;
    }
}

/// The settable fields of an endpoint, as a create or update names them (`None`: not given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointFields {
    pub url: Option<String>,
    pub event_types: Option<Vec<String>>,
    pub description: Option<String>,
    pub enabled: Option<bool>,
}

/// A new endpoint from a create's fields; `url` is required. Whether the URL's host may be
/// reached is the caller's second check ([`address`]), after resolving it.
pub fn new_endpoint(
    fields: EndpointFields,
    id: EndpointId,
    owner: Owner,
    secret: StoredSecret,
    now: Timestamp,
) -> Result<Endpoint, ValidationError> {
    let url = fields.url.clone().ok_or_else(|| ValidationError::new("url", "`url` is required"))?;
    let mut endpoint = Endpoint {
        id,
        owner,
        url: String::new(),
        event_types: Vec::new(),
        description: String::new(),
        enabled: true,
        disabled_reason: None,
        secrets: vec![secret],
        created_at: now,
        updated_at: now,
        callback: false,
    };
    patch_endpoint(&mut endpoint, EndpointFields { url: Some(url), ..fields }, now)?;
    Ok(endpoint)
}

/// Applies the fields given; all are checked before any changes.
pub fn patch_endpoint(
    endpoint: &mut Endpoint,
    fields: EndpointFields,
    now: Timestamp,
) -> Result<(), ValidationError> {
    if let Some(url) = &fields.url {
        check_url(url)?;
    }
    if let Some(types) = &fields.event_types {
        check_event_types(types)?;
    }
    if let Some(description) = &fields.description
        && description.chars().count() > MAX_DESCRIPTION_CHARS
    {
        return Err(ValidationError::new(
            "description",
            format!("`description` must be at most {MAX_DESCRIPTION_CHARS} characters"),
        ));
    }
    if let Some(url) = fields.url {
        endpoint.url = url;
    }
    if let Some(types) = fields.event_types {
        endpoint.event_types = types;
    }
    if let Some(description) = fields.description {
        endpoint.description = description;
    }
    if let Some(enabled) = fields.enabled {
        endpoint.enabled = enabled;
        if enabled {
            endpoint.disabled_reason = None;
        }
    }
    endpoint.updated_at = now;
    Ok(())
}

/// The URL's host as the delivery must resolve it, when it is a name (not an address literal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlHost {
    Name(String),
    Address(std::net::IpAddr),
}

/// Where an endpoint URL points, once it passed [`check_url`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: UrlHost,
    pub port: u16,
}

/// `http` or `https`, a host, no user name or password, no fragment, at most
/// [`MAX_URL_CHARS`] characters; answers where it points.
pub fn check_url(url: &str) -> Result<Target, ValidationError> {
    check_url_as("url", url)
}

/// [`check_url`] for a URL given as `param` (a run's `callback_url`, an agent's
/// `config.execution.default_callback_url`): the same rules, the error naming `param`.
pub fn check_url_as(param: &str, url: &str) -> Result<Target, ValidationError> {
    let refuse = |why: &str| ValidationError::new(param, format!("`{param}` {why}"));
    if url.chars().count() > MAX_URL_CHARS {
        return Err(refuse(&format!("must be at most {MAX_URL_CHARS} characters")));
    }
    let (scheme, rest) = url.split_once("://").ok_or_else(|| refuse("must be an absolute http(s) URL"))?;
    let default_port = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return Err(refuse("must use http or https")),
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(refuse("must not contain whitespace or control characters"));
    }
    if url.contains('#') {
        return Err(refuse("must not have a fragment"));
    }
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(refuse("must not carry a user name or password"));
    }
    let (host, port) = split_authority(authority).ok_or_else(|| refuse("has no valid host"))?;
    let port = match port {
        None => default_port,
        Some(text) => {
            text.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| refuse("has an invalid port"))?
        }
    };
    let host = if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        UrlHost::Address(std::net::IpAddr::V6(inner.parse().map_err(|_| refuse("has an invalid IPv6 host"))?))
    } else if let Ok(v4) = host.parse::<std::net::Ipv4Addr>() {
        UrlHost::Address(std::net::IpAddr::V4(v4))
    } else {
        let valid = !host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
        // A top-level label starts with a letter; numeric forms (`0x7f.1`, `2130706433`) are
        // addresses to some resolvers.
        let tld_ok =
            host.rsplit('.').next().is_some_and(|l| l.starts_with(|c: char| c.is_ascii_alphabetic()));
        if !valid || !tld_ok {
            return Err(refuse("has no valid host"));
        }
        UrlHost::Name(host.to_ascii_lowercase())
    };
    Ok(Target { host, port })
}

fn split_authority(authority: &str) -> Option<(&str, Option<&str>)> {
    if authority.starts_with('[') {
        let end = authority.find(']')?;
        let (host, rest) = authority.split_at(end + 1);
        match rest {
            "" => Some((host, None)),
            _ => Some((host, Some(rest.strip_prefix(':')?))),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => Some((host, Some(port))),
            None => Some((authority, None)),
        }
    }
}

/// Known types only, each once. An empty list subscribes to every type.
pub fn check_event_types(types: &[String]) -> Result<(), ValidationError> {
    for (i, t) in types.iter().enumerate() {
        let param = format!("eventTypes[{i}]");
        if !EVENT_TYPES.contains(&t.as_str()) {
            return Err(ValidationError::new(
                &param,
                format!("`{param}` is not a known event type; known: {}", EVENT_TYPES.join(", ")),
            ));
        }
        if types[..i].contains(t) {
            return Err(ValidationError::new(&param, format!("`{param}` repeats an event type")));
        }
    }
    Ok(())
}

/// Days a message and its attempts (the delivery records) are kept after the message was made;
/// the retention sweep deletes them then.
pub const RECORD_RETENTION_DAYS: i64 = 30;

/// Where a message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    /// Not delivered yet; another attempt is due.
    Pending,
    Succeeded,
    /// Every attempt failed, or the endpoint was gone (410).
    Failed,
}

/// One event sent to one endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub id: MessageId,
    /// The endpoint's owner (where the endpoint is read from).
    #[serde(flatten)]
    pub owner: Owner,
    pub endpoint_id: EndpointId,
    pub event_type: String,
    /// The exact body sent (its bytes are what is signed).
    pub payload: String,
    /// Where this message goes when not to its endpoint's URL: a background run's callback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub status: MessageStatus,
    pub attempts: u32,
    #[serde(default)]
    pub next_attempt_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

/// The body of a message: Standard Webhooks' recommended `{type, timestamp, data}`.
pub fn payload(event_type: &str, data: &serde_json::Value, now: Timestamp) -> String {
    serde_json::json!({ "type": event_type, "timestamp": now.rfc3339(), "data": data }).to_string()
}

/// What one attempt found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    pub message_id: MessageId,
    /// 1 for the first attempt.
    pub number: u32,
    pub at: Timestamp,
    #[serde(default)]
    pub status_code: Option<u16>,
    pub duration_ms: u64,
    #[serde(default)]
    pub error: Option<String>,
    /// At most [`MAX_EXCERPT_BYTES`] of the receiver's answer.
    #[serde(default)]
    pub response_excerpt: Option<String>,
}

/// What an answer means for the message and the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Delivered,
    /// `410 Gone`: the receiver wants no more; the endpoint is disabled.
    Gone,
    /// Any other answer, a timeout or a connection failure.
    Retry,
}

pub fn verdict(status_code: Option<u16>) -> Verdict {
    match status_code {
        Some(200..=299) => Verdict::Delivered,
        Some(410) => Verdict::Gone,
        _ => Verdict::Retry,
    }
}

/// The first [`MAX_EXCERPT_BYTES`] of `body`, cut at a character boundary.
pub fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(MAX_EXCERPT_BYTES + 4)]);
    let mut end = text.len().min(MAX_EXCERPT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Records `attempt` on `message`: delivered, failed for good, or pending with the next try due
/// on the production schedule.
pub fn settle(message: &mut Message, attempt: &Attempt) -> Verdict {
    settle_scaled(message, attempt, 1.0)
}

/// [`settle`] with the schedule's delays multiplied by `scale` (tests shorten it; the
/// deployment runs 1.0).
pub fn settle_scaled(message: &mut Message, attempt: &Attempt, scale: f64) -> Verdict {
    let verdict = verdict(attempt.status_code);
    message.attempts = message.attempts.max(attempt.number);
    match verdict {
        Verdict::Delivered => {
            message.status = MessageStatus::Succeeded;
            message.next_attempt_at = None;
        }
        Verdict::Gone => {
            message.status = MessageStatus::Failed;
            message.next_attempt_at = None;
        }
        Verdict::Retry => match schedule::delay_ms_after(attempt.number, scale) {
            Some(delay) => {
                message.status = MessageStatus::Pending;
                message.next_attempt_at = Some(attempt.at.plus_millis(delay));
            }
            None => {
                message.status = MessageStatus::Failed;
                message.next_attempt_at = None;
            }
        },
    }
    verdict
}

#[cfg(test)]
mod tests;
