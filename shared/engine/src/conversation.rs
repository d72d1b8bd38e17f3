//! Rebuilding the model's view of a session from its event log.

use std::collections::HashSet;

use agentplane_domain::event::{Event, EventType};
use serde_json::Value;

use crate::model::{ChatMessage, WireFunction, WireToolCall};

fn text(data: &Value) -> String {
    data.get("text").and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The conversation so far as Chat Completions messages. Consecutive tool calls become one
/// assistant message; a call whose result was never recorded (a turn that died mid-step) is
/// left out, since providers refuse a call without its result.
pub fn conversation(events: &[Event]) -> Vec<ChatMessage> {
    let answered: HashSet<&str> = events
        .iter()
        .filter(|e| e.kind == EventType::ToolResult)
        .filter_map(|e| e.data.get("call_id").and_then(Value::as_str))
        .collect();
    let mut messages: Vec<ChatMessage> = Vec::new();
    let mut previous_was_call = false;
    for event in events {
        let is_call = event.kind == EventType::ToolCall;
        match event.kind {
            EventType::UserMessage => messages.push(ChatMessage::User { content: text(&event.data) }),
            EventType::AssistantMessage => messages
                .push(ChatMessage::Assistant { content: Some(text(&event.data)), tool_calls: Vec::new() }),
            EventType::ToolCall => {
                let id = event.data.get("call_id").and_then(Value::as_str).unwrap_or_default();
                if answered.contains(id) {
                    let call = WireToolCall {
                        id: id.to_owned(),
                        kind: "function".into(),
                        function: WireFunction {
                            name: event
                                .data
                                .get("name")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                            arguments: event
                                .data
                                .get("arguments_text")
                                .and_then(Value::as_str)
                                .unwrap_or("{}")
                                .to_owned(),
                        },
                    };
                    let assistant_text =
                        event.data.get("assistant_text").and_then(Value::as_str).map(str::to_owned);
                    match messages.last_mut() {
                        Some(ChatMessage::Assistant { tool_calls, content }) if previous_was_call => {
                            tool_calls.push(call);
                            if content.is_none() {
                                *content = assistant_text;
                            }
                        }
                        _ => messages
                            .push(ChatMessage::Assistant { content: assistant_text, tool_calls: vec![call] }),
                    }
                }
            }
            EventType::ToolResult => {
                let id = event.data.get("call_id").and_then(Value::as_str).unwrap_or_default().to_owned();
                let content = match event.data.get("output") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                messages.push(ChatMessage::Tool { tool_call_id: id, content });
            }
            EventType::TurnStarted | EventType::Usage | EventType::TurnEnded | EventType::Error => continue,
        }
        previous_was_call = is_call;
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentplane_domain::{SessionId, Timestamp};
    use serde_json::json;

    fn ev(seq: u64, kind: EventType, data: Value) -> Event {
        Event {
            session_id: SessionId::from_random([1; 16]),
            seq,
            kind,
            turn_id: Some("t".into()),
            data,
            created_at: Timestamp::from_unix_millis(0),
        }
    }

    #[test]
    fn tool_calls_of_one_step_share_an_assistant_message_and_unanswered_calls_are_dropped() {
        let events = vec![
            ev(1, EventType::UserMessage, json!({"text": "hi"})),
            ev(2, EventType::ToolCall, json!({"call_id": "a", "name": "echo", "arguments_text": "{}"})),
            ev(3, EventType::ToolCall, json!({"call_id": "b", "name": "add", "arguments_text": "{}"})),
            ev(4, EventType::ToolResult, json!({"call_id": "a", "output": {"x": 1}})),
            ev(5, EventType::ToolResult, json!({"call_id": "b", "output": "error: nope"})),
            ev(6, EventType::AssistantMessage, json!({"text": "done"})),
            ev(7, EventType::UserMessage, json!({"text": "again"})),
            ev(8, EventType::ToolCall, json!({"call_id": "c", "name": "echo"})),
        ];
        let messages = conversation(&events);
        assert_eq!(messages.len(), 6);
        match &messages[1] {
            ChatMessage::Assistant { tool_calls, .. } => assert_eq!(tool_calls.len(), 2),
            other => panic!("{other:?}"),
        }
        assert!(matches!(&messages[5], ChatMessage::User { content } if content == "again"));
    }
}
