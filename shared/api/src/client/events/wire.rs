//! The event log's wire: the event object, its list, and the cursors the routes take.

use agentplane_domain::SessionId;
use agentplane_domain::event::Event;
use agentplane_domain::page::Page;
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};

/// One entry of a session's event log. `id` is its per-session, gapless sequence number.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Event)]
pub struct EventBody {
    pub id: u64,
    /// Always `session.event`.
    #[schema(value_type = String, pattern = "^session\\.event$")]
    pub object: &'static str,
    #[schema(value_type = String)]
    pub session_id: SessionId,
    /// The turn that wrote it, if a turn did.
    pub turn_id: Option<String>,
    /// The event type (`message.user`, `turn.ended`, …). Later releases add types: a client
    /// skips those it does not know.
    #[serde(rename = "type")]
    pub kind: String,
    /// The event's payload; its fields depend on `type`.
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    /// Unix seconds.
    pub created_at: i64,
    /// Present (`true`) on the events of a turn a later turn replaced (a regenerated answer,
    /// an edited message): a client renders the conversation without them.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schema(nullable = false)]
    pub superseded: bool,
}

impl From<&Event> for EventBody {
    fn from(event: &Event) -> Self {
        Self {
            id: event.seq,
            object: "session.event",
            session_id: event.session_id,
            turn_id: event.turn_id.clone(),
            kind: event.kind.as_str().to_owned(),
            data: serde_json::to_value(&event.data).unwrap_or_default(),
            created_at: event.created_at.unix_seconds(),
            superseded: false,
        }
    }
}

/// A page of events, oldest first; `first_id` and `last_id` are sequence numbers.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventList {
    /// Always `list`.
    #[schema(value_type = String, pattern = "^list$")]
    pub object: &'static str,
    pub data: Vec<EventBody>,
    pub has_more: bool,
    pub first_id: Option<u64>,
    pub last_id: Option<u64>,
}

impl EventList {
    /// The page, the events of `superseded` turns marked.
    pub fn marked(page: &Page<Event>, superseded: &[String]) -> Self {
        let mut list = Self::of(page);
        for event in &mut list.data {
            event.superseded = event.turn_id.as_ref().is_some_and(|t| superseded.contains(t));
        }
        list
    }

    pub fn of(page: &Page<Event>) -> Self {
        Self {
            object: "list",
            data: page.items.iter().map(EventBody::from).collect(),
            has_more: page.has_more,
            first_id: page.items.first().map(|e| e.seq),
            last_id: page.items.last().map(|e| e.seq),
        }
    }
}

/// `GET /sessions/{session_id}/events`.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct EventsParams {
    /// Events after this sequence number (default 0: from the start).
    #[param(minimum = 0)]
    after: Option<u64>,
    /// Page size, 1 to 100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u16>,
}

/// `GET /sessions/{session_id}/events/stream` (its `Last-Event-ID` header wins over `after`).
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct StreamParams {
    /// Resume after this sequence number (default 0); a `Last-Event-ID` header wins over it.
    #[param(minimum = 0)]
    after: Option<u64>,
}

/// A non-negative integer cursor (`after`, `Last-Event-ID`).
pub fn parse_seq(text: &str) -> Option<u64> {
    (!text.is_empty() && text.len() <= 19 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}
