//! Every field of an OpenAI Responses request, and what the turn routes do with it: honoured,
//! accepted and ignored (the SDKs send it by default, or the agent fixes what it would set), or
//! refused with a 400 naming it (it would change what the turn means). A field not in the table
//! is refused as unknown. README's "Responses request fields" table is this one (a test holds
//! them together).

use agentplane_domain::ValidationError;
use serde_json::{Map, Value};

/// What a route does with a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Treatment {
    /// Read and acted on.
    Honoured,
    /// Read and left alone (said why in [`FIELDS`]).
    Ignored,
    /// Taken only with the values [`check`] allows; any other is refused, named.
    Limited,
    /// Always refused, named.
    Refused,
}

/// Every field, what is done with it, and why (the README's table).
pub const FIELDS: &[(&str, Treatment, &str)] = &[
    ("agent", Treatment::Honoured, "the agent's id (`agt_…`); else `model` names it"),
    (
        "model",
        Treatment::Limited,
        "the agent's id when `agent` is absent; with `agent`, its id or its model; another is refused",
    ),
    (
        "input",
        Treatment::Honoured,
        "a string or items: user messages (text, `input_file`, `input_image` parts), `system`/`developer` messages (added to the instructions), `function_call_output` items answering the calls of a paused turn; earlier `assistant`, `function_call`, `mcp_call` and `reasoning` items are history the session already holds",
    ),
    (
        "stream",
        Treatment::Honoured,
        "`true`: the answer is `text/event-stream` with the Responses streaming events",
    ),
    (
        "previous_response_id",
        Treatment::Honoured,
        "`resp_{session}`: continue that session (404 if it is not this project's)",
    ),
    ("session_id", Treatment::Honoured, "continue this session (same as `previous_response_id`)"),
    (
        "instructions",
        Treatment::Honoured,
        "appended to the agent's instructions for this turn (at most 32000 characters)",
    ),
    (
        "tools",
        Treatment::Limited,
        "`function` tools run by the caller: the turn stops with `function_call` items; other tool types are refused",
    ),
    ("metadata", Treatment::Honoured, "a new session's metadata (at most 16 string values)"),
    ("background", Treatment::Honoured, "`true`: queued as a background run (202)"),
    ("callback_url", Treatment::Honoured, "where a background run's end is reported"),
    (
        "tool_choice",
        Treatment::Limited,
        "`auto` (ignored: the default); forcing or forbidding tools is refused",
    ),
    (
        "text",
        Treatment::Limited,
        "`format` `text` and `verbosity` are ignored; structured output formats are refused",
    ),
    ("parallel_tool_calls", Treatment::Ignored, "the model may always call several tools in a step"),
    ("store", Treatment::Ignored, "every turn is stored (the session's event log)"),
    ("include", Treatment::Ignored, "nothing extra is included"),
    ("truncation", Treatment::Ignored, "the session's transcript is never truncated silently"),
    ("user", Treatment::Ignored, "not recorded"),
    ("safety_identifier", Treatment::Ignored, "not recorded"),
    ("prompt_cache_key", Treatment::Ignored, "not used"),
    ("service_tier", Treatment::Ignored, "not used"),
    ("stream_options", Treatment::Ignored, "not used"),
    ("temperature", Treatment::Ignored, "the agent fixes its sampling"),
    ("top_p", Treatment::Ignored, "the agent fixes its sampling"),
    ("top_logprobs", Treatment::Ignored, "no log probabilities are returned"),
    ("max_output_tokens", Treatment::Ignored, "the agent's `max_steps` and budget bound the turn"),
    ("max_tool_calls", Treatment::Ignored, "the agent's `max_steps` bounds the turn"),
    ("reasoning", Treatment::Ignored, "the agent's model decides"),
    ("conversation", Treatment::Refused, "use `previous_response_id` or `session_id`"),
    ("prompt", Treatment::Refused, "stored prompts are not supported: the agent is the prompt"),
];

/// The fields `POST /sessions/{id}/messages` does not take (the session is in its path).
const NOT_ON_MESSAGES: &[&str] = &["previous_response_id", "session_id", "metadata"];

/// Which route reads the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST /responses`, `POST /agents/responses`.
    Responses,
    /// `POST /sessions/{id}/messages`.
    Messages,
}

fn refused(field: &str, why: impl Into<String>) -> ValidationError {
    ValidationError::new(field, why)
}

/// Refuses what the table refuses, and any field it does not know, naming it (the first by
/// name). `model` is checked against the agent later ([`super::handlers`]).
pub fn check(body: &Map<String, Value>, route: Route) -> Result<(), ValidationError> {
    for (name, value) in body {
        let known = FIELDS.iter().find(|(field, _, _)| field == name);
        let Some((field, treatment, why)) = known else {
            return Err(refused(name, format!("unknown field `{name}`")));
        };
        if route == Route::Messages && NOT_ON_MESSAGES.contains(field) {
            return Err(refused(name, format!("`{name}` is not taken here: the session is in the path")));
        }
        match treatment {
            Treatment::Refused => return Err(refused(name, format!("`{name}` is not supported: {why}"))),
            Treatment::Limited => limited(name, value)?,
            Treatment::Honoured | Treatment::Ignored => {}
        }
    }
    Ok(())
}

fn limited(name: &str, value: &Value) -> Result<(), ValidationError> {
    match name {
        "tool_choice" => match value {
            Value::Null => Ok(()),
            Value::String(choice) if choice == "auto" => Ok(()),
            _ => Err(refused(
                "tool_choice",
                "only `tool_choice: \"auto\"` is taken: the agent decides which tools the model may call",
            )),
        },
        "text" => match value {
            Value::Null => Ok(()),
            Value::Object(text) => {
                for (key, part) in text {
                    match key.as_str() {
                        "verbosity" => {}
                        "format" => match part.get("type").and_then(Value::as_str) {
                            Some("text") => {}
                            _ => {
                                return Err(refused(
                                    "text.format",
                                    "only `text.format.type: \"text\"` is taken: structured output formats are not supported yet",
                                ));
                            }
                        },
                        other => {
                            let param = format!("text.{other}");
                            return Err(refused(&param, format!("unknown field `{param}`")));
                        }
                    }
                }
                Ok(())
            }
            _ => Err(refused("text", "`text` must be an object")),
        },
        // Read (and checked) where it is used.
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn body(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn param(value: Value, route: Route) -> Option<String> {
        check(&body(value), route).err().and_then(|e| e.param)
    }

    #[test]
    fn the_sdks_default_requests_are_taken() {
        // What openai-python and the Agents SDK send by default.
        let agents_sdk = json!({
            "model": "agt_x", "include": [], "input": [{"content": "hi", "role": "user"}],
            "instructions": "Be brief", "tools": [], "stream": true, "store": true,
            "parallel_tool_calls": true, "tool_choice": "auto", "truncation": "disabled",
            "text": {"format": {"type": "text"}, "verbosity": "medium"}, "temperature": 0.2,
            "top_p": 1.0, "user": "u", "reasoning": null, "max_output_tokens": 100,
        });
        assert_eq!(param(agents_sdk, Route::Responses), None);
    }

    #[test]
    fn what_would_change_the_turn_is_refused_naming_the_field() {
        assert_eq!(
            param(json!({"tool_choice": "required"}), Route::Responses).as_deref(),
            Some("tool_choice")
        );
        let forced = json!({"tool_choice": {"type": "function", "name": "add"}});
        assert_eq!(param(forced, Route::Responses).as_deref(), Some("tool_choice"));
        let schema = json!({"text": {"format": {"type": "json_schema", "schema": {}}}});
        assert_eq!(param(schema, Route::Responses).as_deref(), Some("text.format"));
        assert_eq!(param(json!({"prompt": {"id": "p"}}), Route::Responses).as_deref(), Some("prompt"));
        assert_eq!(param(json!({"conversation": "c"}), Route::Responses).as_deref(), Some("conversation"));
        assert_eq!(param(json!({"frobnicate": 1}), Route::Responses).as_deref(), Some("frobnicate"));
        assert_eq!(param(json!({"session_id": "s"}), Route::Messages).as_deref(), Some("session_id"));
        assert_eq!(param(json!({"session_id": "s"}), Route::Responses), None);
    }

    #[test]
    fn the_readme_table_lists_every_field_as_the_code_treats_it() {
        let readme = include_str!("../../../../../README.md");
        for (field, treatment, _) in FIELDS {
            let word = match treatment {
                Treatment::Honoured => "honoured",
                Treatment::Ignored => "ignored",
                Treatment::Limited => "limited",
                Treatment::Refused => "refused",
            };
            let row = format!("| `{field}` | {word} |");
            assert!(readme.contains(&row), "README lacks the row starting {row}");
        }
    }
}
