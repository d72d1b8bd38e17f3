use agentplane_domain::event::Event;
use serde_json::{Value, json};

pub fn render(event: &Event) -> Value {
    json!({
        "id": event.seq,
        "object": "session.event",
        "session_id": event.session_id,
        "turn_id": event.turn_id,
        "type": event.kind.as_str(),
        "data": event.data,
        "created_at": event.created_at.unix_seconds(),
    })
}

/// A non-negative integer cursor (`after`, `Last-Event-ID`).
pub fn parse_seq(text: &str) -> Option<u64> {
    (!text.is_empty() && text.len() <= 19 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}
