//! A client for any OpenAI-compatible Chat Completions endpoint: tool calling, usage capture, a
//! per-call timeout, retries with backoff on 429/5xx/connection failures. The API key is sent
//! as a header and never appears in errors, events or logs.

use std::time::Duration;

use agentplane_domain::pricing::Usage;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use thiserror::Error;

#[derive(Debug, Clone)]
pub struct ModelConfig {
    pub base_url: String,
    pub api_key: Option<String>,
    pub call_timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    pub initial_backoff: Duration,
}

impl ModelConfig {
    /// `AGENTPLANE_MODEL_BASE_URL` (default `https://api.openai.com/v1`),
    /// `AGENTPLANE_MODEL_API_KEY`, `AGENTPLANE_MODEL_TIMEOUT_MS` (default 60000),
    /// `AGENTPLANE_MODEL_MAX_RETRIES` (default 3).
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok();
        Self {
            base_url: var("AGENTPLANE_MODEL_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".into()),
            api_key: var("AGENTPLANE_MODEL_API_KEY"),
            call_timeout: Duration::from_millis(
                var("AGENTPLANE_MODEL_TIMEOUT_MS").and_then(|v| v.parse().ok()).unwrap_or(60_000),
            ),
            max_retries: var("AGENTPLANE_MODEL_MAX_RETRIES").and_then(|v| v.parse().ok()).unwrap_or(3),
            initial_backoff: Duration::from_millis(250),
        }
    }
}

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
}

impl ModelError {
    fn retryable(&self) -> bool {
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
        }
    }
}

#[derive(Debug, Clone)]
pub struct ModelClient {
    http: reqwest::Client,
    config: ModelConfig,
}

#[derive(Deserialize)]
struct CompletionResponse {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ResponseMessage,
}

#[derive(Deserialize)]
struct ResponseMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl ModelClient {
    pub fn new(config: ModelConfig) -> Self {
        let http = reqwest::Client::builder().build().unwrap_or_default();
        Self { http, config }
    }

    /// One completion with retries. `deadline` bounds the whole call including retries.
    pub async fn complete(
        &self,
        model: &str,
        messages: &[ChatMessage],
        tools: &[ToolDefinition],
        deadline: tokio::time::Instant,
    ) -> Result<ModelReply, ModelError> {
        let mut body = json!({ "model": model, "messages": messages });
        if !tools.is_empty() {
            body["tools"] = Value::Array(
                tools
                    .iter()
                    .map(|t| {
                        json!({"type": "function", "function": {
                            "name": t.name, "description": t.description, "parameters": t.parameters
                        }})
                    })
                    .collect(),
            );
        }
        let mut backoff = self.config.initial_backoff;
        let mut attempt = 0;
        loop {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            if remaining.is_zero() {
                return Err(ModelError::Timeout);
            }
            let result = self.attempt(&body, remaining.min(self.config.call_timeout)).await;
            match result {
                Err(err) if err.retryable() && attempt < self.config.max_retries => {
                    attempt += 1;
                    tracing::warn!(code = err.code(), attempt, "model call failed; retrying");
                    let wait = backoff.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
                    tokio::time::sleep(wait).await;
                    backoff = backoff.saturating_mul(2);
                }
                other => return other,
            }
        }
    }

    async fn attempt(&self, body: &Value, timeout: Duration) -> Result<ModelReply, ModelError> {
        let url = format!("{}/chat/completions", self.config.base_url.trim_end_matches('/'));
        let mut request = self.http.post(url).json(body).timeout(timeout);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| if e.is_timeout() { ModelError::Timeout } else { ModelError::Connection })?;
        let status = response.status().as_u16();
        if status == 429 {
            return Err(ModelError::RateLimited);
        }
        if !(200..300).contains(&status) {
            return Err(ModelError::Provider(status));
        }
        let text = response
            .text()
            .await
            .map_err(|e| if e.is_timeout() { ModelError::Timeout } else { ModelError::Connection })?;
        let parsed: CompletionResponse =
            serde_json::from_str(&text).map_err(|e| ModelError::InvalidResponse(e.to_string()))?;
        let message = parsed
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| ModelError::InvalidResponse("no choices".into()))?
            .message;
        let usage = parsed
            .usage
            .map(|u| Usage { input_tokens: u.prompt_tokens, output_tokens: u.completion_tokens })
            .unwrap_or_default();
        Ok(ModelReply {
            text: message.content.filter(|t| !t.is_empty()),
            tool_calls: message.tool_calls.unwrap_or_default(),
            usage,
        })
    }
}

impl crate::ports::ChatModel for ModelClient {
    async fn complete(
        &self,
        model: &str,
        messages: &[ChatMessage],
        tools: &[ToolDefinition],
        deadline: tokio::time::Instant,
    ) -> Result<ModelReply, ModelError> {
        ModelClient::complete(self, model, messages, tools, deadline).await
    }
}
