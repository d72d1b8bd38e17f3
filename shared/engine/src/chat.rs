//! The model port's vocabulary: messages in Chat Completions form, tool definitions, a reply and
//! how a call fails. The turn loop speaks it (the `ChatModel` port); `model.rs` carries it
//! to an OpenAI-compatible endpoint.

use agentplane_domain::pricing::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

/// One message of the conversation in Chat Completions form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: UserContent,
    },
    Assistant {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// A user message's content: text (most messages, and every one stored before images), or
/// parts — text and images by reference (a short-lived URL), in Chat Completions form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageUrl {
    pub url: String,
}

/// What stands in for an image in a later request: its URL has expired by then.
pub const IMAGE_SHOWN_EARLIER: &str = "[an image the user attached to this message was shown earlier]";

impl UserContent {
    /// The text and these image URLs (text alone without images).
    pub fn with_images(text: String, images: &[String]) -> Self {
        if images.is_empty() {
            return Self::Text(text);
        }
        let mut parts = vec![ContentPart::Text { text }];
        parts.extend(
            images.iter().map(|url| ContentPart::ImageUrl { image_url: ImageUrl { url: url.clone() } }),
        );
        Self::Parts(parts)
    }

    /// The same content with every image replaced by a note (for messages of earlier turns).
    pub fn without_images(self) -> Self {
        match self {
            Self::Text(text) => Self::Text(text),
            Self::Parts(parts) => Self::Parts(
                parts
                    .into_iter()
                    .map(|part| match part {
                        ContentPart::ImageUrl { .. } => {
                            ContentPart::Text { text: IMAGE_SHOWN_EARLIER.into() }
                        }
                        text => text,
                    })
                    .collect(),
            ),
        }
    }
}

impl From<String> for UserContent {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl PartialEq<str> for UserContent {
    fn eq(&self, other: &str) -> bool {
        matches!(self, Self::Text(text) if text == other)
    }
}

/// Messages read back from a transcript for a later request: images become notes.
pub fn without_images(messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    messages
        .into_iter()
        .map(|m| match m {
            ChatMessage::User { content } => ChatMessage::User { content: content.without_images() },
            other => other,
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub function: WireFunction,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireFunction {
    pub name: String,
    pub arguments: String,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// What one successful call returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    pub text: Option<String>,
    pub tool_calls: Vec<WireToolCall>,
    pub usage: Usage,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ModelError {
    #[error("the model provider rate-limited every attempt")]
    RateLimited,
    #[error("the model provider answered {0}")]
    Provider(u16),
    #[error("the model call timed out")]
    Timeout,
    #[error("the model provider could not be reached")]
    Connection,
    #[error("the model provider's answer could not be read: {0}")]
    InvalidResponse(String),
    /// A streamed answer broke off after `sent` had gone out (never retried: a retry would
    /// send that text again).
    #[error("the model's streamed answer broke off")]
    StreamBroken { sent: String },
}

impl ModelError {
    pub(crate) fn retryable(&self) -> bool {
        matches!(self, Self::RateLimited | Self::Timeout | Self::Connection)
            || matches!(self, Self::Provider(status) if *status >= 500)
    }

    /// A stable code for events and error bodies.
    pub fn code(&self) -> &'static str {
        match self {
            Self::RateLimited => "model_rate_limited",
            Self::Provider(_) => "model_provider_error",
            Self::Timeout => "model_timeout",
            Self::Connection => "model_unreachable",
            Self::InvalidResponse(_) => "model_invalid_response",
            Self::StreamBroken { .. } => "model_stream_interrupted",
        }
    }
}
