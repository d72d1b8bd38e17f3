//! What a Responses body may hold.

use agentplane_domain::ValidationError;
use serde_json::Value;

pub const MAX_INPUT_CHARS: usize = 100_000;

fn part_text(part: &Value, param: &str) -> Result<String, ValidationError> {
    match part {
        Value::String(s) => Ok(s.clone()),
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("input_text") | Some("text") => o
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| ValidationError::new(param, "an input_text part needs `text`")),
            Some("input_image") | Some("input_file") => {
                Err(ValidationError::new(param, "attachments are not enabled for this agent"))
            }
            _ => Err(ValidationError::new(param, "unknown content part type")),
        },
        _ => Err(ValidationError::new(param, "content parts must be objects")),
    }
}

/// `input`: a string, or an array of message parts / user messages
/// (`{"role":"user","content": "…" | [{"type":"input_text","text":"…"}]}`). Returns the text.
pub fn input_text(value: Option<&Value>) -> Result<String, ValidationError> {
    let text = match value {
        None | Some(Value::Null) => return Err(ValidationError::new("input", "`input` is required")),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => {
            let mut texts = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let param = format!("input[{i}]");
                match item {
                    Value::Object(o)
                        if o.contains_key("role")
                            || o.get("type").and_then(Value::as_str) == Some("message") =>
                    {
                        if o.get("role").and_then(Value::as_str) != Some("user") {
                            return Err(ValidationError::new(param, "only `user` messages can be sent"));
                        }
                        match o.get("content") {
                            Some(Value::String(s)) => texts.push(s.clone()),
                            Some(Value::Array(parts)) => {
                                for (j, part) in parts.iter().enumerate() {
                                    texts.push(part_text(part, &format!("{param}.content[{j}]"))?);
                                }
                            }
                            _ => return Err(ValidationError::new(param, "a message needs `content`")),
                        }
                    }
                    other => texts.push(part_text(other, &param)?),
                }
            }
            texts.join("\n")
        }
        Some(_) => {
            return Err(ValidationError::new(
                "input",
                "`input` must be a string or an array of message parts",
            ));
        }
    };
    if text.trim().is_empty() {
        return Err(ValidationError::new("input", "`input` must not be empty"));
    }
    if text.chars().count() > MAX_INPUT_CHARS {
        return Err(ValidationError::new(
            "input",
            format!("`input` may be at most {MAX_INPUT_CHARS} characters"),
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_parts_and_messages_are_read() {
        assert_eq!(input_text(Some(&json!("hi"))), Ok("hi".into()));
        assert_eq!(input_text(Some(&json!([{"type": "input_text", "text": "a"}, "b"]))), Ok("a\nb".into()));
        let message = json!([{"role": "user", "content": [{"type": "input_text", "text": "x"}]}]);
        assert_eq!(input_text(Some(&message)), Ok("x".into()));
    }

    #[test]
    fn bad_input_is_refused() {
        for bad in [
            json!(null),
            json!(""),
            json!("  "),
            json!(5),
            json!([{"type": "input_image"}]),
            json!([{"role": "system", "content": "x"}]),
            json!([{}]),
        ] {
            assert!(input_text(Some(&bad)).is_err(), "{bad}");
        }
        assert!(input_text(None).is_err());
    }
}
