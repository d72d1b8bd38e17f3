//! The `view_image` tool: the model asks to see an image file of the session, and sees it in
//! the next model call (a short-lived URL in a user message after the step's tool results;
//! a tool result itself carries text only in Chat Completions). The engine offers it when the
//! running config takes attachments and the model reads images; where the files live and
//! which models read images is the [`ImageSource`]'s business (the API's).

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;

use agentplane_domain::{ProjectId, SessionId};
use serde_json::{Value, json};

use crate::model::ToolDefinition;

pub const VIEW_IMAGE_TOOL: &str = "view_image";

/// The text before the images a step's `view_image` calls showed.
pub const VIEWED_NOTE: &str = "[the images view_image was asked for]";

/// An image the model asked for: its URL for the next call, and what the tool result says.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewedImage {
    pub url: String,
    pub about: Value,
}

/// Where session images come from.
pub trait ImageSource: Send + Sync + Debug {
    /// Whether `model` is shown images at all.
    fn reads_images(&self, model: &str) -> bool;
    /// The session's image `file_id`, ready to show; `Err` says why not (the model is told).
    fn view<'a>(
        &'a self,
        project: &'a ProjectId,
        session: &'a SessionId,
        file_id: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<ViewedImage, String>> + Send + 'a>>;
}

pub fn definition() -> ToolDefinition {
    ToolDefinition {
        name: VIEW_IMAGE_TOOL.into(),
        description: "Look at an image file of this session: you see it in your next step.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"file_id": {"type": "string", "description": "The image file's id (file_…)."}},
            "required": ["file_id"],
        }),
    }
}

/// The `file_id` argument of a call, or why the call is refused.
pub fn file_id_of(arguments: &str) -> Result<String, String> {
    let value: Value =
        serde_json::from_str(arguments).map_err(|e| format!("arguments are not valid JSON: {e}"))?;
    value
        .get("file_id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| "`file_id` must be a file id string".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_id_is_a_non_empty_string() {
        assert_eq!(file_id_of(r#"{"file_id":"file_1"}"#), Ok("file_1".into()));
        for bad in ["", "{}", r#"{"file_id":""}"#, r#"{"file_id":3}"#, "[1]"] {
            assert!(file_id_of(bad).is_err(), "{bad}");
        }
    }
}
