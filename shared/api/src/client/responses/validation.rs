//! What a Responses body may hold.

use agentplane_domain::ValidationError;
use agentplane_domain::agent::Attachments;
use serde_json::{Map, Value};

pub const MAX_INPUT_CHARS: usize = 100_000;

/// `background`: absent, `false` (the call is held while the turn runs) or `true` (the turn is
/// queued as a background run and the call answers at once).
pub fn background(body: &Map<String, Value>) -> Result<bool, ValidationError> {
    match body.get("background") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(false),
        Some(Value::Bool(true)) => Ok(true),
        Some(_) => Err(ValidationError::new("background", "`background` must be a boolean")),
    }
}

/// `callback_url`: absent, or an http(s) URL of at most 2048 characters that the run's end is
/// reported to.
pub fn callback_url(body: &Map<String, Value>) -> Result<Option<String>, ValidationError> {
    match body.get("callback_url") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(url))
            if url.len() <= 2048
                && (url.starts_with("https://") || url.starts_with("http://"))
                && url.len() > 8 =>
        {
            Ok(Some(url.clone()))
        }
        Some(_) => Err(ValidationError::new("callback_url", "`callback_url` must be an http(s) URL")),
    }
}

/// Why a file or image part cannot be used, naming the setting that decides it.
fn attachment_refused(kind: &str) -> String {
    format!(
        "`{kind}` parts are refused: this agent takes no attachments (its \
         `config.attachments.enabled` is false)"
    )
}

/// A file or image part of the input: a session file to give the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRef {
    /// Where it was in the body (`input[0].content[1]`), for errors.
    pub param: String,
    pub file_id: String,
    /// `input_image` (else `input_file`).
    pub image: bool,
}

/// One part: its text (`None` for a file part, which goes to `files`).
fn part_text(
    part: &Value,
    param: &str,
    attachments: &Attachments,
    files: &mut Vec<FileRef>,
) -> Result<Option<String>, ValidationError> {
    match part {
        Value::String(s) => Ok(Some(s.clone())),
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("input_text") | Some("text") => o
                .get("text")
                .and_then(Value::as_str)
                .map(|t| Some(t.to_owned()))
                .ok_or_else(|| ValidationError::new(param, "an input_text part needs `text`")),
            Some(kind @ ("input_image" | "input_file")) => {
                if !attachments.enabled {
                    return Err(ValidationError::new(param, attachment_refused(kind)));
                }
                let file_id = o.get("file_id").and_then(Value::as_str).ok_or_else(|| {
                    ValidationError::new(
                        param,
                        format!("an {kind} part needs `file_id` (a session file's id)"),
                    )
                })?;
                files.push(FileRef {
                    param: param.to_owned(),
                    file_id: file_id.to_owned(),
                    image: kind == "input_image",
                });
                Ok(None)
            }
            _ => Err(ValidationError::new(param, "unknown content part type")),
        },
        _ => Err(ValidationError::new(param, "content parts must be objects")),
    }
}

/// At most this many file parts in one message.
pub const MAX_FILE_PARTS: usize = 10;

/// `input`: a string, or an array of message parts / user messages
/// (`{"role":"user","content": "…" | [{"type":"input_text","text":"…"}]}`). Returns the text.
/// File and image parts are refused unless `attachments` (the running config's) are enabled
/// (the routes take them with [`input_with_files`]).
#[cfg(test)]
pub fn input_text(value: Option<&Value>, attachments: &Attachments) -> Result<String, ValidationError> {
    let (text, files) = input_with_files(value, attachments)?;
    match files.first() {
        Some(file) => Err(ValidationError::new(file.param.clone(), "file parts are not taken here")),
        None => Ok(text),
    }
}

/// [`input_text`], and the file and image parts (`{type: "input_file" | "input_image",
/// file_id}`) when `attachments` are enabled, in order. With file parts the text may be empty.
pub fn input_with_files(
    value: Option<&Value>,
    attachments: &Attachments,
) -> Result<(String, Vec<FileRef>), ValidationError> {
    let mut files = Vec::new();
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
                                    texts.extend(part_text(
                                        part,
                                        &format!("{param}.content[{j}]"),
                                        attachments,
                                        &mut files,
                                    )?);
                                }
                            }
                            _ => return Err(ValidationError::new(param, "a message needs `content`")),
                        }
                    }
                    other => texts.extend(part_text(other, &param, attachments, &mut files)?),
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
    if text.trim().is_empty() && files.is_empty() {
        return Err(ValidationError::new("input", "`input` must not be empty"));
    }
    if files.len() > MAX_FILE_PARTS {
        return Err(ValidationError::new(
            "input",
            format!("`input` may reference at most {MAX_FILE_PARTS} files"),
        ));
    }
    if text.chars().count() > MAX_INPUT_CHARS {
        return Err(ValidationError::new(
            "input",
            format!("`input` may be at most {MAX_INPUT_CHARS} characters"),
        ));
    }
    Ok((text, files))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(value: Option<&Value>) -> Result<String, ValidationError> {
        input_text(value, &Attachments::default())
    }

    #[test]
    fn strings_parts_and_messages_are_read() {
        assert_eq!(input(Some(&json!("hi"))), Ok("hi".into()));
        assert_eq!(input(Some(&json!([{"type": "input_text", "text": "a"}, "b"]))), Ok("a\nb".into()));
        let message = json!([{"role": "user", "content": [{"type": "input_text", "text": "x"}]}]);
        assert_eq!(input(Some(&message)), Ok("x".into()));
    }

    #[test]
    fn file_parts_are_refused_naming_the_attachments_setting() {
        let message = json!([{"role": "user", "content": ["hi", {"type": "input_file", "file_id": "f"}]}]);
        let err = input(Some(&message)).err();
        assert_eq!(err.as_ref().and_then(|e| e.param.as_deref()), Some("input[0].content[1]"));
        assert!(err.is_some_and(|e| e.message.contains("config.attachments.enabled")));
        let enabled = Attachments { enabled: true, ..Attachments::default() };
        let err = input_with_files(Some(&json!([{"type": "input_image"}])), &enabled).err();
        assert!(err.is_some_and(|e| e.message.contains("needs `file_id`")));
        let parts = json!([{"role": "user", "content": [
            {"type": "input_text", "text": "see"},
            {"type": "input_image", "file_id": "file_1"},
            {"type": "input_file", "file_id": "file_2"},
        ]}]);
        let (text, files) = input_with_files(Some(&parts), &enabled).unwrap_or_default();
        assert_eq!(text, "see");
        assert_eq!(files.len(), 2);
        assert!(files[0].image && !files[1].image);
        assert_eq!(files[1].param, "input[0].content[2]");
        let only_file = input_with_files(Some(&json!([{"type": "input_file", "file_id": "f"}])), &enabled);
        assert!(only_file.is_ok());
    }

    #[test]
    fn background_is_a_boolean_and_callbacks_are_http_urls() {
        let body = |v: Value| match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        assert_eq!(background(&body(json!({"background": false}))).ok(), Some(false));
        assert_eq!(background(&body(json!({"background": true}))).ok(), Some(true));
        assert_eq!(background(&body(json!({}))).ok(), Some(false));
        assert!(background(&body(json!({"background": "yes"}))).is_err());
        assert!(callback_url(&body(json!({"callback_url": "ftp://x"}))).is_err());
        assert_eq!(
            callback_url(&body(json!({"callback_url": "https://a.example/cb"}))).ok().flatten().as_deref(),
            Some("https://a.example/cb")
        );
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
            assert!(input(Some(&bad)).is_err(), "{bad}");
        }
        assert!(input(None).is_err());
    }
}
