//! A conversation replayed from elsewhere: a Responses `input` that carries earlier items
//! (assistant messages, `function_call` and `function_call_output` items, as the OpenAI Agents
//! SDK sends without `previous_response_id`) and names no session starts a new session whose
//! transcript is exactly those items. The last user message is the turn's message; what
//! follows it (the model's calls and the caller's results) continues that turn.

use agentplane_domain::ValidationError;
use agentplane_engine::Replay;
use agentplane_engine::model::{ChatMessage, UserContent, WireFunction, WireToolCall};
use serde_json::Value;

/// The most items a replayed conversation may hold.
pub const MAX_REPLAY_ITEMS: usize = 500;

/// The text of a message's content: a string, or its text parts joined.
fn text_of(content: Option<&Value>, param: &str) -> Result<String, ValidationError> {
    match content {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(j, part)| match part {
                Value::String(text) => Ok(text.clone()),
                _ => part.get("text").and_then(Value::as_str).map(str::to_owned).ok_or_else(|| {
                    ValidationError::new(
                        format!("{param}.content[{j}]"),
                        "an earlier message of a replayed conversation takes text parts only",
                    )
                }),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|texts| texts.join("\n")),
        _ => Err(ValidationError::new(param, "a message needs `content`")),
    }
}

fn field<'a>(item: &'a Value, name: &str, param: &str) -> Result<&'a str, ValidationError> {
    item.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ValidationError::new(param, format!("this item needs `{name}`")))
}

/// The conversation `input` replays, and the turn's message (the last user message's text).
pub fn read(input: &Value) -> Result<(Replay, String), ValidationError> {
    let items = input.as_array().map(Vec::as_slice).unwrap_or_default();
    if items.len() > MAX_REPLAY_ITEMS {
        return Err(ValidationError::new(
            "input",
            format!("a replayed conversation may hold at most {MAX_REPLAY_ITEMS} items"),
        ));
    }
    let is_user = |item: &Value| item.get("role").and_then(Value::as_str) == Some("user");
    let Some(last_user) = items.iter().rposition(is_user) else {
        return Err(ValidationError::new("input", "a replayed conversation needs a user message"));
    };
    let mut messages: Vec<ChatMessage> = Vec::new();
    let mut input = String::new();
    let mut calls: Vec<String> = Vec::new();
    let mut split = 0;
    for (i, item) in items.iter().enumerate() {
        let param = format!("input[{i}]");
        let kind = item.get("type").and_then(Value::as_str);
        let role = item.get("role").and_then(Value::as_str);
        match (kind, role) {
            (_, Some("user")) if i == last_user => {
                input = text_of(item.get("content"), &param)?;
                split = messages.len();
            }
            (_, Some("user")) => {
                messages.push(ChatMessage::User {
                    content: UserContent::Text(text_of(item.get("content"), &param)?),
                });
            }
            (_, Some("assistant")) => {
                let text = text_of(item.get("content"), &param)?;
                messages.push(ChatMessage::Assistant { content: Some(text), tool_calls: Vec::new() });
            }
            // Added to the instructions (read with the rest of `input`).
            (_, Some("system" | "developer")) => {}
            (Some("function_call"), _) => {
                let call = WireToolCall {
                    id: field(item, "call_id", &param)?.to_owned(),
                    kind: "function".into(),
                    function: WireFunction {
                        name: field(item, "name", &param)?.to_owned(),
                        arguments: field(item, "arguments", &param)?.to_owned(),
                    },
                };
                calls.push(call.id.clone());
                // A step's calls are one assistant message (with its text, if it had any), on
                // the same side of the turn's user message.
                let same_side = i < last_user || messages.len() > split;
                match messages.last_mut() {
                    Some(ChatMessage::Assistant { tool_calls, .. }) if same_side => tool_calls.push(call),
                    _ => messages.push(ChatMessage::Assistant { content: None, tool_calls: vec![call] }),
                }
            }
            (Some("function_call_output"), _) => {
                let call_id = field(item, "call_id", &param)?;
                if !calls.iter().any(|c| c == call_id) {
                    return Err(ValidationError::new(
                        format!("{param}.call_id"),
                        format!("no earlier `function_call` of the conversation has the call_id `{call_id}`"),
                    ));
                }
                let output = match item.get("output") {
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                    None => {
                        return Err(ValidationError::new(param, "a `function_call_output` needs `output`"));
                    }
                };
                messages.push(ChatMessage::Tool { tool_call_id: call_id.to_owned(), content: output });
            }
            // What only the server that ran it can replay.
            (
                Some("reasoning" | "mcp_call" | "mcp_approval_request" | "mcp_list_tools" | "item_reference"),
                _,
            ) => {}
            _ => {
                return Err(ValidationError::new(
                    param,
                    "a replayed conversation holds messages, `function_call` and `function_call_output` items",
                ));
            }
        }
    }
    if input.trim().is_empty() {
        return Err(ValidationError::new(
            format!("input[{last_user}]"),
            "the user message must not be empty",
        ));
    }
    let after = messages.split_off(split);
    Ok((Replay { before: messages, after }, input))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_conversation_reads_as_the_transcript_before_and_after_the_last_user_message() {
        let input = json!([
            {"role": "user", "content": "hi"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
            {"role": "user", "content": "where is A1?"},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{\"id\":\"A1\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": "shipped"},
        ]);
        let (replay, text) = read(&input).unwrap_or_default();
        assert_eq!(text, "where is A1?");
        assert_eq!(replay.before.len(), 2);
        assert_eq!(replay.after.len(), 2);
        assert!(
            matches!(&replay.after[0], ChatMessage::Assistant { tool_calls, .. } if tool_calls[0].id == "c1")
        );
        assert!(matches!(&replay.after[1], ChatMessage::Tool { content, .. } if content == "shipped"));
        let orphan = json!([{"role": "user", "content": "x"}, {"type": "function_call_output", "call_id": "zz", "output": "1"}]);
        assert_eq!(read(&orphan).err().and_then(|e| e.param).as_deref(), Some("input[1].call_id"));
        let no_user = json!([{"role": "assistant", "content": "x"}]);
        assert_eq!(read(&no_user).err().and_then(|e| e.param).as_deref(), Some("input"));
    }
}
