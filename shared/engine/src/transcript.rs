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
    /// Where each turn's messages begin (its user message), so that a turn can be left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    turns: Vec<TurnMark>,
}

/// A turn's first message in the transcript. A turn runs to the next mark, or the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnMark {
    pub turn_id: String,
    pub start: usize,
}

pub fn encode(messages: &[ChatMessage], turns: &[TurnMark]) -> Result<String, PortError> {
    #[derive(Serialize)]
    struct BodyRef<'a> {
        messages: &'a [ChatMessage],
        #[serde(skip_serializing_if = "<[TurnMark]>::is_empty")]
        turns: &'a [TurnMark],
    }
    serde_json::to_string(&BodyRef { messages, turns }).map_err(|e| PortError::Corrupt(e.to_string()))
}

/// The messages of a stored body and its turns' marks.
pub fn decode_marked(body: &str) -> Result<(Vec<ChatMessage>, Vec<TurnMark>), PortError> {
    serde_json::from_str::<Body>(body)
        .map(|b| (b.messages, b.turns))
        .map_err(|e| PortError::Corrupt(format!("transcript: {e}")))
}

/// The conversation without the turns `superseded`, and the marks of what is left. Messages
/// before the first mark (a transcript older than marks) are kept as they are.
pub fn without_turns(
    messages: Vec<ChatMessage>,
    marks: Vec<TurnMark>,
    superseded: &[String],
) -> (Vec<ChatMessage>, Vec<TurnMark>) {
    let mut marks: Vec<TurnMark> = marks.into_iter().filter(|m| m.start <= messages.len()).collect();
    marks.sort_by_key(|m| m.start);
    if superseded.is_empty() || !marks.iter().any(|m| superseded.contains(&m.turn_id)) {
        return (messages, marks);
    }
    let bounds: Vec<(usize, usize)> = marks
        .iter()
        .enumerate()
        .map(|(i, m)| (m.start, marks.get(i + 1).map_or(messages.len(), |next| next.start)))
        .collect();
    let first = marks.first().map_or(messages.len(), |m| m.start);
    let mut kept: Vec<ChatMessage> = Vec::with_capacity(messages.len());
    let mut kept_marks = Vec::with_capacity(marks.len());
    let mut all: Vec<Option<ChatMessage>> = messages.into_iter().map(Some).collect();
    kept.extend(all[..first].iter_mut().filter_map(Option::take));
    for (mark, (from, to)) in marks.into_iter().zip(bounds) {
        if superseded.contains(&mark.turn_id) {
            continue;
        }
        kept_marks.push(TurnMark { turn_id: mark.turn_id, start: kept.len() });
        kept.extend(all[from..to].iter_mut().filter_map(Option::take));
    }
    (kept, kept_marks)
}

/// The messages of a stored body; `Corrupt` when it is not one.
pub fn decode(body: &str) -> Result<Vec<ChatMessage>, PortError> {
    decode_marked(body).map(|(messages, _)| messages)
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
        let body = encode(&messages, &[]).unwrap_or_default();
        assert_eq!(decode(&body).ok(), Some(messages));
    }

    fn user(text: &str) -> ChatMessage {
        ChatMessage::User { content: text.to_owned().into() }
    }

    fn answer(text: &str) -> ChatMessage {
        ChatMessage::Assistant { content: Some(text.into()), tool_calls: Vec::new() }
    }

    fn mark(turn: &str, start: usize) -> TurnMark {
        TurnMark { turn_id: turn.into(), start }
    }

    #[test]
    fn superseded_turns_leave_the_conversation_and_the_rest_keeps_its_marks() {
        let messages = vec![user("old"), answer("o"), user("q1"), answer("a1"), user("q2"), answer("a2")];
        let marks = vec![mark("t1", 2), mark("t2", 4)];
        let body = encode(&messages, &marks).unwrap_or_default();
        assert_eq!(decode_marked(&body).ok(), Some((messages.clone(), marks.clone())));
        // The last turn superseded (regenerate): the legacy prefix and t1 stay.
        let (kept, kept_marks) = without_turns(messages.clone(), marks.clone(), &["t2".into()]);
        assert_eq!(kept, messages[..4].to_vec());
        assert_eq!(kept_marks, vec![mark("t1", 2)]);
        // t1 and t2 superseded (an edit of q1).
        let (kept, kept_marks) = without_turns(messages.clone(), marks.clone(), &["t1".into(), "t2".into()]);
        assert_eq!((kept, kept_marks), (messages[..2].to_vec(), Vec::new()));
        // Only t1 (a turn in the middle): t2's mark moves down.
        let (kept, kept_marks) = without_turns(messages.clone(), marks.clone(), &["t1".into()]);
        assert_eq!(kept, vec![user("old"), answer("o"), user("q2"), answer("a2")]);
        assert_eq!(kept_marks, vec![mark("t2", 2)]);
        // Nothing superseded, or a turn that never saved: all stays.
        assert_eq!(without_turns(messages.clone(), marks.clone(), &["t9".into()]), (messages, marks));
    }

    #[test]
    fn a_body_that_is_not_a_transcript_is_corrupt_not_an_empty_conversation() {
        assert!(matches!(decode("{\"turns\": []}"), Err(PortError::Corrupt(_))));
        assert!(matches!(decode("not json"), Err(PortError::Corrupt(_))));
        assert_eq!(decode(r#"{"messages": []}"#).ok(), Some(Vec::new()));
    }
}
