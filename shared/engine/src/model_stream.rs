//! A streamed Chat Completions answer (`stream: true`): its Server-Sent Events read as they
//! arrive, each piece of text handed on at once, the tool calls put together from their pieces
//! by index, and the usage from the last chunk (`stream_options.include_usage`).

use std::time::Duration;

use agentplane_domain::pricing::Usage;
use serde::Deserialize;
use serde_json::Value;

use crate::model::{ModelClient, ModelError, ModelReply, WireFunction, WireToolCall, parse_completion};

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Delta,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<CallPiece>>,
}

#[derive(Deserialize)]
struct CallPiece {
    #[serde(default)]
    index: usize,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionPiece>,
}

#[derive(Deserialize)]
struct FunctionPiece {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// What the chunks so far add up to.
#[derive(Default)]
struct Answer {
    text: String,
    calls: Vec<(String, String, String)>,
    usage: Usage,
    finished: bool,
}

impl Answer {
    /// Reads one `data:` payload; the text it adds.
    fn read(&mut self, payload: &str) -> Result<Option<String>, ModelError> {
        if payload == "[DONE]" {
            self.finished = true;
            return Ok(None);
        }
        let chunk: Chunk =
            serde_json::from_str(payload).map_err(|e| ModelError::InvalidResponse(e.to_string()))?;
        if let Some(usage) = chunk.usage {
            self.usage = Usage { input_tokens: usage.prompt_tokens, output_tokens: usage.completion_tokens };
        }
        let mut added = None;
        for choice in chunk.choices {
            if choice.finish_reason.is_some() {
                self.finished = true;
            }
            if let Some(piece) = choice.delta.content.filter(|p| !p.is_empty()) {
                self.text.push_str(&piece);
                added = Some(piece);
            }
            for call in choice.delta.tool_calls.unwrap_or_default() {
                while self.calls.len() <= call.index {
                    self.calls.push(Default::default());
                }
                let slot = &mut self.calls[call.index];
                if let Some(id) = call.id {
                    slot.0 = id;
                }
                if let Some(function) = call.function {
                    slot.1.push_str(&function.name.unwrap_or_default());
                    slot.2.push_str(&function.arguments.unwrap_or_default());
                }
            }
        }
        Ok(added)
    }

    fn reply(self) -> ModelReply {
        ModelReply {
            text: (!self.text.is_empty()).then_some(self.text),
            tool_calls: self
                .calls
                .into_iter()
                .map(|(id, name, arguments)| WireToolCall {
                    id,
                    kind: "function".into(),
                    function: WireFunction { name, arguments },
                })
                .collect(),
            usage: self.usage,
        }
    }
}

/// One streamed call. A provider that answers a whole JSON body instead is read as one.
pub(crate) async fn attempt(
    client: &ModelClient,
    body: &Value,
    timeout: Duration,
    text: &(dyn Fn(&str) + Send + Sync),
) -> Result<ModelReply, ModelError> {
    let mut response = client.send(body, timeout).await?;
    let streamed = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let failed =
        |e: reqwest::Error| if e.is_timeout() { ModelError::Timeout } else { ModelError::Connection };
    if !streamed {
        let whole = response.text().await.map_err(failed)?;
        let reply = parse_completion(&whole)?;
        if let Some(answer) = &reply.text {
            text(answer);
        }
        return Ok(reply);
    }
    let mut answer = Answer::default();
    let mut pending: Vec<u8> = Vec::new();
    // Once text went out, any failure is a broken stream (never retried).
    let broken = |answer: &Answer, err: ModelError| {
        if answer.text.is_empty() { err } else { ModelError::StreamBroken { sent: answer.text.clone() } }
    };
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(err) => return Err(broken(&answer, failed(err))),
        };
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let Some(payload) = line.trim().strip_prefix("data:") else { continue };
            match answer.read(payload.trim()) {
                Ok(Some(piece)) => text(&piece),
                Ok(None) => {}
                Err(err) => return Err(broken(&answer, err)),
            }
        }
    }
    if !answer.finished {
        return Err(broken(&answer, ModelError::Connection));
    }
    Ok(answer.reply())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_add_up_to_text_calls_and_usage() {
        let mut answer = Answer::default();
        let pieces = [
            r#"{"choices":[{"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"add","arguments":"{\"a\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            "[DONE]",
        ];
        let texts: Vec<Option<String>> = pieces.iter().map(|p| answer.read(p).ok().flatten()).collect();
        assert_eq!(texts[0].as_deref(), Some("Hel"));
        assert_eq!(texts[1].as_deref(), Some("lo"));
        assert!(answer.finished);
        let reply = answer.reply();
        assert_eq!(reply.text.as_deref(), Some("Hello"));
        assert_eq!(reply.tool_calls.len(), 1);
        assert_eq!(reply.tool_calls[0].function.arguments, "{\"a\":1}");
        assert_eq!(reply.usage.output_tokens, 4);
    }
}
