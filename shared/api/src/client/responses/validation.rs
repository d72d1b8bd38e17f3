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

/// A file or image part of the input: a session file to give the model, or (`inline`) a file
/// sent in the part itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRef {
    /// Where it was in the body (`input[0].content[1]`), for errors.
    pub param: String,
    /// The session file's id (empty for an inline file).
    pub file_id: String,
    /// `input_image` (else `input_file`).
    pub image: bool,
    /// An `input_file`'s `file_data` (and `filename`): the file itself, needing no session.
    pub inline: Option<InlineFile>,
}

/// An `input_file` sent inline, as the OpenAI SDKs send one: `file_data` is a data URL
/// (`data:application/pdf;base64,…`), read by `files::input`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineFile {
    pub filename: Option<String>,
    pub file_data: String,
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
                if let Some(inline) = inline_file(o, kind, param)? {
                    files.push(FileRef {
                        param: param.to_owned(),
                        file_id: String::new(),
                        image: false,
                        inline: Some(inline),
                    });
                    return Ok(None);
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
                    inline: None,
                });
                Ok(None)
            }
            _ => Err(ValidationError::new(param, "unknown content part type")),
        },
        _ => Err(ValidationError::new(param, "content parts must be objects")),
    }
}

/// An `input_file` part's `file_data` and `filename`, if it has them (not with `file_id`).
fn inline_file(
    part: &Map<String, Value>,
    kind: &str,
    param: &str,
) -> Result<Option<InlineFile>, ValidationError> {
    let data = match part.get("file_data") {
        None | Some(Value::Null) => return Ok(None),
        Some(_) if kind != "input_file" => {
            return Err(ValidationError::new(param, "`file_data` is taken by `input_file` parts only"));
        }
        Some(Value::String(data)) => data.clone(),
        Some(_) => return Err(ValidationError::new(param, "`file_data` must be a data URL (a string)")),
    };
    if part.get("file_id").is_some_and(|id| !id.is_null()) {
        return Err(ValidationError::new(param, "give `file_id` or `file_data`, not both"));
    }
    let filename = match part.get("filename") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(name.clone()),
        Some(_) => return Err(ValidationError::new(param, "`filename` must be a string")),
    };
    Ok(Some(InlineFile { filename, file_data: data }))
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

/// What an `input` holds besides the new message: what the OpenAI SDKs send.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InputExtras {
    /// `system` and `developer` messages: added to the instructions for this turn.
    pub system: Vec<String>,
    /// `function_call_output` items: the call (an action's id), its output, and where it was.
    pub outputs: Vec<CallOutput>,
    /// The first item of history (an earlier `assistant` message, `function_call`,
    /// `mcp_call`, `reasoning`, …): where it was, and the session its id names, if ours.
    pub history: Option<(String, Option<agentplane_domain::SessionId>)>,
}

/// A `function_call_output` item.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutput {
    pub param: String,
    pub call_id: String,
    pub output: String,
}

/// The session an output item's id names (`msg_…`, `fc_…`, `mcp_…` are `{prefix}_{session}_{seq}`).
fn session_of_item(item: &Map<String, Value>) -> Option<agentplane_domain::SessionId> {
    let id = item.get("id")?.as_str()?;
    let (_, rest) = id.split_once('_')?;
    let (session, seq) = rest.rsplit_once('_')?;
    seq.parse::<u64>().ok()?;
    session.parse().ok()
}

/// The text of a `system`/`developer` message's content.
fn plain_text(content: Option<&Value>, param: &str) -> Result<String, ValidationError> {
    match content {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|part| match part.get("text").and_then(Value::as_str) {
                Some(text) => Ok(text.to_owned()),
                None => Err(ValidationError::new(param, "instruction messages take text parts only")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|texts| texts.join("\n")),
        _ => Err(ValidationError::new(param, "a message needs `content`")),
    }
}

/// [`input_text`], and the file and image parts (`{type: "input_file" | "input_image",
/// file_id}`) when `attachments` are enabled, in order. With file parts the text may be empty.
pub fn input_with_files(
    value: Option<&Value>,
    attachments: &Attachments,
) -> Result<(String, Vec<FileRef>), ValidationError> {
    let (text, files, extras) = input_items(value, attachments)?;
    if let Some(output) = extras.outputs.first() {
        return Err(ValidationError::new(
            output.param.clone(),
            "`function_call_output` items are not taken here",
        ));
    }
    if let Some((param, _)) = extras.history {
        return Err(ValidationError::new(param, "only `user` messages can be sent"));
    }
    if !extras.system.is_empty() {
        return Err(ValidationError::new("input", "only `user` messages can be sent"));
    }
    Ok((text, files))
}

/// `input` as the Responses routes read it: the new user message (its text and file parts, the
/// user messages after the last item of history), and [`InputExtras`]. The text may be empty
/// only when files or `function_call_output` items are given.
pub fn input_items(
    value: Option<&Value>,
    attachments: &Attachments,
) -> Result<(String, Vec<FileRef>, InputExtras), ValidationError> {
    let mut files = Vec::new();
    let mut extras = InputExtras::default();
    let text = match value {
        None | Some(Value::Null) => return Err(ValidationError::new("input", "`input` is required")),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => {
            let mut texts = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let param = format!("input[{i}]");
                let Value::Object(o) = item else {
                    texts.extend(part_text(item, &param, attachments, &mut files)?);
                    continue;
                };
                let kind = o.get("type").and_then(Value::as_str);
                let role = o.get("role").and_then(Value::as_str);
                let history = |extras: &mut InputExtras| {
                    if extras.history.is_none() {
                        extras.history = Some((param.clone(), session_of_item(o)));
                    } else if let Some((_, None)) = extras.history {
                        extras.history = Some((param.clone(), session_of_item(o)));
                    }
                };
                match (kind, role) {
                    (Some("function_call_output"), _) => {
                        let call_id = o.get("call_id").and_then(Value::as_str).ok_or_else(|| {
                            ValidationError::new(&param, "a `function_call_output` needs `call_id`")
                        })?;
                        let output = match o.get("output") {
                            Some(Value::String(s)) => s.clone(),
                            Some(other) => other.to_string(),
                            None => {
                                return Err(ValidationError::new(
                                    &param,
                                    "a `function_call_output` needs `output`",
                                ));
                            }
                        };
                        extras.outputs.push(CallOutput {
                            param: param.clone(),
                            call_id: call_id.to_owned(),
                            output,
                        });
                        history(&mut extras);
                        // What came before is history: only later user messages are new.
                        texts.clear();
                        files.clear();
                    }
                    (
                        Some(
                            "function_call"
                            | "mcp_call"
                            | "reasoning"
                            | "mcp_approval_request"
                            | "mcp_list_tools"
                            | "item_reference",
                        ),
                        _,
                    )
                    | (_, Some("assistant")) => {
                        history(&mut extras);
                        texts.clear();
                        files.clear();
                        // Outputs count only when nothing came after them: these were answered.
                        extras.outputs.clear();
                    }
                    (_, Some("system" | "developer")) => {
                        extras.system.push(plain_text(o.get("content"), &param)?);
                    }
                    (_, Some("user")) | (Some("message"), None) => {
                        if role != Some("user") {
                            return Err(ValidationError::new(param, "a message needs `role`"));
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
                    (_, Some(_)) => {
                        return Err(ValidationError::new(
                            param,
                            "a message's `role` is `user`, `assistant`, `system` or `developer`",
                        ));
                    }
                    _ => texts.extend(part_text(item, &param, attachments, &mut files)?),
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
    if text.trim().is_empty() && files.is_empty() && extras.outputs.is_empty() {
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
    Ok((text, files, extras))
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
        let inline = json!([{"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBE"}]);
        let (_, files) = input_with_files(Some(&inline), &enabled).unwrap_or_default();
        let given = files.first().and_then(|f| f.inline.clone());
        assert_eq!(given.and_then(|f| f.filename).as_deref(), Some("a.pdf"));
        for bad in [
            json!({"type": "input_file", "file_id": "f", "file_data": "data:,x"}),
            json!({"type": "input_file", "file_data": 5}),
            json!({"type": "input_image", "file_data": "data:,x"}),
        ] {
            assert!(input_with_files(Some(&json!([bad])), &enabled).is_err(), "{bad}");
        }
        let off = json!([{"type": "input_file", "file_data": "data:application/pdf;base64,JVBE"}]);
        assert!(input(Some(&off)).err().is_some_and(|e| e.message.contains("config.attachments.enabled")));
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
    fn only_trailing_call_outputs_answer_and_history_names_its_session() {
        let session = agentplane_domain::SessionId::from_random([3; 16]);
        let items = json!([
            {"role": "user", "content": "where is B2?"},
            {"type": "function_call", "id": format!("fc_{session}_4"), "call_id": "act_1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "act_1", "output": "shipped"},
        ]);
        let (text, _, extras) = input_items(Some(&items), &Attachments::default()).unwrap_or_default();
        assert_eq!(text, "");
        assert_eq!(extras.outputs.len(), 1);
        assert_eq!(extras.history.as_ref().and_then(|h| h.1), Some(session));
        let mut later = items.as_array().cloned().unwrap_or_default();
        later.push(json!({"role": "assistant", "content": [{"type": "output_text", "text": "B2 shipped"}]}));
        later.push(json!({"role": "user", "content": "thanks"}));
        let (text, _, extras) =
            input_items(Some(&Value::Array(later)), &Attachments::default()).unwrap_or_default();
        assert_eq!(text, "thanks");
        assert!(extras.outputs.is_empty());
        let system = json!([{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]);
        let (text, _, extras) = input_items(Some(&system), &Attachments::default()).unwrap_or_default();
        assert_eq!((text.as_str(), extras.system), ("hi", vec!["Be terse.".to_owned()]));
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
