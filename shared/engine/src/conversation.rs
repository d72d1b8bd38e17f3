//! Rebuilding the model's view of a session from its event log.

use std::collections::HashSet;

use agentplane_domain::event::{Event, EventPayload};
use serde_json::Value;

use crate::model::{ChatMessage, WireFunction, WireToolCall};

/// The conversation so far as Chat Completions messages. Consecutive tool calls become one
/// assistant message; a call whose result was never recorded (a turn that died mid-step) is
/// left out, since providers refuse a call without its result. Events of types this release does
/// not know, and events cut down past their shape, are not part of it.
pub fn conversation(events: &[Event]) -> Vec<ChatMessage> {
    let payloads: Vec<EventPayload> = events.iter().map(Event::payload).collect();
    let answered: HashSet<&str> = payloads
        .iter()
        .filter_map(|p| match p {
            EventPayload::ToolResult(result) => Some(result.call_id.as_str()),
            _ => None,
        })
        .collect();
    let mut messages: Vec<ChatMessage> = Vec::new();
    let mut previous_was_call = false;
    for payload in &payloads {
        let is_call = matches!(payload, EventPayload::ToolCall(_));
        match payload {
            EventPayload::UserMessage(m) => messages.push(ChatMessage::User { content: m.text.clone() }),
            EventPayload::AssistantMessage(m) => messages
                .push(ChatMessage::Assistant { content: Some(m.text.clone()), tool_calls: Vec::new() }),
            EventPayload::ToolCall(call) => {
                if answered.contains(call.call_id.as_str()) {
                    let wire = WireToolCall {
                        id: call.call_id.clone(),
                        kind: "function".into(),
                        function: WireFunction {
                            name: call.name.clone(),
                            arguments: call.arguments_text.clone(),
                        },
                    };
                    let assistant_text = call.assistant_text.clone();
                    match messages.last_mut() {
                        Some(ChatMessage::Assistant { tool_calls, content }) if previous_was_call => {
                            tool_calls.push(wire);
                            if content.is_none() {
                                *content = assistant_text;
                            }
                        }
                        _ => messages
                            .push(ChatMessage::Assistant { content: assistant_text, tool_calls: vec![wire] }),
                    }
                }
            }
            EventPayload::ToolResult(result) => {
                let content = match &result.output {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                messages.push(ChatMessage::Tool { tool_call_id: result.call_id.clone(), content });
            }
            EventPayload::TurnStarted(_)
            | EventPayload::Usage(_)
            | EventPayload::TurnEnded(_)
            | EventPayload::Error(_)
            | EventPayload::Unknown { .. } => continue,
        }
        previous_was_call = is_call;
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentplane_domain::event::EventType;
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

    fn call(seq: u64, id: &str, name: &str) -> Event {
        ev(
            seq,
            EventType::ToolCall,
            json!({"step": 1, "call_id": id, "name": name, "arguments": {}, "arguments_text": "{}"}),
        )
    }

    fn result(seq: u64, id: &str, output: &Value) -> Event {
        ev(
            seq,
            EventType::ToolResult,
            json!({"step": 1, "call_id": id, "name": "echo", "output": output, "is_error": false}),
        )
    }

    #[test]
    fn tool_calls_of_one_step_share_an_assistant_message_and_unanswered_calls_are_dropped() {
        let events = vec![
            ev(1, EventType::UserMessage, json!({"text": "hi"})),
            call(2, "a", "echo"),
            call(3, "b", "add"),
            result(4, "a", &json!({"x": 1})),
            result(5, "b", &json!("error: nope")),
            ev(6, EventType::AssistantMessage, json!({"text": "done"})),
            ev(7, EventType::UserMessage, json!({"text": "again"})),
            call(8, "c", "echo"),
        ];
        let messages = conversation(&events);
        assert_eq!(messages.len(), 6);
        match &messages[1] {
            ChatMessage::Assistant { tool_calls, .. } => assert_eq!(tool_calls.len(), 2),
            other => panic!("{other:?}"),
        }
        assert!(matches!(&messages[2], ChatMessage::Tool { content, .. } if content == r#"{"x":1}"#));
        assert!(matches!(&messages[3], ChatMessage::Tool { content, .. } if content == "error: nope"));
        assert!(matches!(&messages[5], ChatMessage::User { content } if content == "again"));
    }

    #[test]
    fn events_of_types_this_release_does_not_know_are_left_out_of_the_conversation() {
        let events = vec![
            ev(1, EventType::UserMessage, json!({"text": "hi"})),
            ev(2, EventType::from("approval.requested".to_owned()), json!({"action_id": "act_1"})),
            ev(3, EventType::AssistantMessage, json!({"text": "hello", "_truncated": true})),
        ];
        let messages = conversation(&events);
        assert_eq!(messages.len(), 2);
        assert!(matches!(&messages[1], ChatMessage::Assistant { content: Some(c), .. } if c == "hello"));
    }
}
