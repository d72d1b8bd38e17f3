//! The session transcript's body: the model's conversation (everything but the agent's
//! instructions, which each turn puts first afresh) as JSON. It is saved at the end of every
//! step and read at the start of the next turn, whole: never rebuilt from the event log, whose
//! events are cut at 16 KB and expire.

use serde::{Deserialize, Serialize};

use crate::model::ChatMessage;
use crate::ports::PortError;

/// The stored form; an object so that later fields can join the messages.
#[derive(Debug, Serialize, Deserialize)]
struct Body {
    messages: Vec<ChatMessage>,
}

pub fn encode(messages: &[ChatMessage]) -> Result<String, PortError> {
    #[derive(Serialize)]
    struct BodyRef<'a> {
        messages: &'a [ChatMessage],
    }
    serde_json::to_string(&BodyRef { messages }).map_err(|e| PortError::Corrupt(e.to_string()))
}

/// The messages of a stored body; `Corrupt` when it is not one.
pub fn decode(body: &str) -> Result<Vec<ChatMessage>, PortError> {
    serde_json::from_str::<Body>(body)
        .map(|b| b.messages)
        .map_err(|e| PortError::Corrupt(format!("transcript: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{WireFunction, WireToolCall};

    #[test]
    fn a_transcript_reads_back_exactly_as_it_was_written() {
        let long = "x".repeat(100_000);
        let messages = vec![
            ChatMessage::User { content: long.clone().into() },
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![WireToolCall {
                    id: "call_1".into(),
                    kind: "function".into(),
                    function: WireFunction { name: "echo".into(), arguments: r#"{"a":"é"}"#.into() },
                }],
            },
            ChatMessage::Tool { tool_call_id: "call_1".into(), content: "y".repeat(20_000) },
            ChatMessage::Assistant { content: Some("done".into()), tool_calls: Vec::new() },
        ];
        let body = encode(&messages).unwrap_or_default();
        assert_eq!(decode(&body).ok(), Some(messages));
    }

    #[test]
    fn a_body_that_is_not_a_transcript_is_corrupt_not_an_empty_conversation() {
        assert!(matches!(decode("{\"turns\": []}"), Err(PortError::Corrupt(_))));
        assert!(matches!(decode("not json"), Err(PortError::Corrupt(_))));
        assert_eq!(decode(r#"{"messages": []}"#).ok(), Some(Vec::new()));
    }
}
