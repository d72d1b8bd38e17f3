//! The session event log: append-only, one gapless sequence per session. Clients must ignore
//! event types they do not know (new ones appear in later releases), and so does this release:
//! a type it does not know reads as [`EventType::Unknown`] and its data as
//! [`EventPayload::Unknown`], never as a failed page.

pub mod payload;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::{SessionId, Timestamp};

pub use payload::EventPayload;

/// Largest `data` kept as is; larger data is cut down and marked `_truncated: true`.
pub const MAX_DATA_BYTES: usize = 16 * 1024;

/// An event's `type`, serialized as its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum EventType {
    TurnStarted,
    UserMessage,
    AssistantMessage,
    ToolCall,
    ToolResult,
    Usage,
    TurnEnded,
    Error,
    /// A turn paused for an action (one event per action).
    ActionRequired,
    /// The session budget was reached: the turn paused or stopped.
    BudgetReached,
    /// Earlier turns were replaced (a regenerated answer, an edited message): a client renders
    /// the log without them.
    TurnSuperseded,
    /// A type written by a later release, kept by name.
    Unknown(String),
}

impl EventType {
    const KNOWN: [Self; 11] = [
        Self::TurnStarted,
        Self::UserMessage,
        Self::AssistantMessage,
        Self::ToolCall,
        Self::ToolResult,
        Self::Usage,
        Self::TurnEnded,
        Self::Error,
        Self::ActionRequired,
        Self::BudgetReached,
        Self::TurnSuperseded,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            Self::TurnStarted => "turn.started",
            Self::UserMessage => "message.user",
            Self::AssistantMessage => "message.assistant",
            Self::ToolCall => "tool.call",
            Self::ToolResult => "tool.result",
            Self::Usage => "usage",
            Self::TurnEnded => "turn.ended",
            Self::Error => "error",
            Self::ActionRequired => "action.required",
            Self::BudgetReached => "budget.reached",
            Self::TurnSuperseded => "turn.superseded",
            Self::Unknown(name) => name,
        }
    }
}

impl From<String> for EventType {
    fn from(name: String) -> Self {
        Self::KNOWN.into_iter().find(|known| known.as_str() == name).unwrap_or(Self::Unknown(name))
    }
}

impl From<EventType> for String {
    fn from(kind: EventType) -> Self {
        match kind {
            EventType::Unknown(name) => name,
            known => known.as_str().to_owned(),
        }
    }
}

/// An event as stored and served. `seq` is the event's id and the SSE `id:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub session_id: SessionId,
    pub seq: u64,
    #[serde(rename = "type")]
    pub kind: EventType,
    pub turn_id: Option<String>,
    pub data: Value,
    pub created_at: Timestamp,
}

impl Event {
    /// The typed payload (an unknown type or shape reads as [`EventPayload::Unknown`]).
    pub fn payload(&self) -> EventPayload {
        EventPayload::from_parts(&self.kind, &self.data)
    }
}

/// An event about to be appended (the log assigns `seq`).
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub kind: EventType,
    pub turn_id: Option<String>,
    pub data: Value,
}

impl NewEvent {
    pub fn new(kind: EventType, turn_id: Option<String>, data: Value) -> Self {
        Self { kind, turn_id, data: bound_data(data) }
    }

    /// An event of a typed payload (its data bounded like any other).
    pub fn from_payload(payload: &EventPayload, turn_id: Option<String>) -> Self {
        Self::new(payload.kind(), turn_id, payload.data())
    }
}

fn size(value: &Value) -> usize {
    serde_json::to_vec(value).map(|v| v.len()).unwrap_or(usize::MAX)
}

fn cut(text: &str, max_bytes: usize) -> String {
    let mut end = max_bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Keeps `data` within 16 KB. An object keeps its shape: its longest strings are shortened
/// until it fits, and `_truncated: true` is added. Anything that still does not fit becomes
/// `{"_truncated": true, "preview": <the start of its JSON text>}`.
pub fn bound_data(data: Value) -> Value {
    if size(&data) <= MAX_DATA_BYTES {
        return data;
    }
    if let Value::Object(mut map) = data.clone() {
        map.insert("_truncated".into(), Value::Bool(true));
        for _ in 0..8 {
            let over = size(&Value::Object(map.clone())).saturating_sub(MAX_DATA_BYTES);
            if over == 0 {
                return Value::Object(map);
            }
            let longest = map
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.len())))
                .max_by_key(|(_, len)| *len);
            let Some((key, len)) = longest else { break };
            if len == 0 {
                break;
            }
            // JSON escaping can make a string longer than its bytes: cut a little extra.
            let keep = len.saturating_sub(over + 64);
            let text = map.get(&key).and_then(Value::as_str).map(|s| cut(s, keep)).unwrap_or_default();
            map.insert(key, Value::String(text));
        }
        if size(&Value::Object(map.clone())) <= MAX_DATA_BYTES {
            return Value::Object(map);
        }
    }
    let text = serde_json::to_string(&data).unwrap_or_default();
    let mut out = Map::new();
    out.insert("_truncated".into(), Value::Bool(true));
    out.insert("preview".into(), json!(cut(&text, MAX_DATA_BYTES - 256)));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_event_of_a_type_this_release_does_not_know_reads_and_serializes_back_unchanged() {
        let stored = json!({
            "session_id": SessionId::from_random([5; 16]), "seq": 7, "type": "approval.requested",
            "turn_id": "turn_1", "data": {"action_id": "act_1"}, "created_at": 1_767_225_600_000_i64,
        });
        let event: Event = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(event.kind, EventType::Unknown("approval.requested".into()));
        assert_eq!(event.kind.as_str(), "approval.requested");
        assert!(
            matches!(event.payload(), EventPayload::Unknown { kind, .. } if kind == "approval.requested")
        );
        assert_eq!(serde_json::to_value(&event).unwrap(), stored);
    }

    #[test]
    fn known_event_types_keep_their_names() {
        for kind in EventType::KNOWN {
            let name = serde_json::to_value(&kind).unwrap();
            assert_eq!(name, json!(kind.as_str()));
            assert_eq!(serde_json::from_value::<EventType>(name).unwrap(), kind);
        }
        assert_eq!(EventType::from("tool.call".to_owned()), EventType::ToolCall);
    }

    #[test]
    fn small_data_is_kept_as_is() {
        let data = json!({"text": "hi"});
        assert_eq!(bound_data(data.clone()), data);
    }

    #[test]
    fn a_large_string_field_is_shortened_and_marked() {
        let data = bound_data(json!({"text": "x".repeat(40_000), "role": "assistant"}));
        assert_eq!(data["_truncated"], true);
        assert_eq!(data["role"], "assistant");
        assert!(size(&data) <= MAX_DATA_BYTES);
    }

    #[test]
    fn a_huge_array_becomes_a_preview() {
        let data = bound_data(json!((0..10_000).collect::<Vec<_>>()));
        assert_eq!(data["_truncated"], true);
        assert!(data["preview"].is_string());
        assert!(size(&data) <= MAX_DATA_BYTES);
    }

    proptest! {
        #[test]
        fn bounded_data_never_exceeds_16_kb(text in ".{0,200}", repeat in 0usize..400, fields in 1usize..5) {
            let mut map = Map::new();
            for i in 0..fields {
                map.insert(format!("f{i}"), json!(text.repeat(repeat)));
            }
            let data = bound_data(Value::Object(map));
            prop_assert!(size(&data) <= MAX_DATA_BYTES);
        }
    }
}
