//! A client for any OpenAI-compatible Chat Completions endpoint: tool calling, usage capture, a
//! per-call timeout, retries with backoff on 429/5xx/connection failures. The API key is sent
//! as a header and never appears in errors, events or logs.

use std::time::Duration;

use agentplane_domain::pricing::Usage;
use serde::Deserialize;
use serde_json::{Value, json};

pub use crate::chat::*;

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

    /// The request body of a completion.
    fn body(model: &str, messages: &[ChatMessage], tools: &[ToolDefinition]) -> Value {
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
        body
    }

    /// One completion with retries. `deadline` bounds the whole call including retries.
    pub async fn complete(
        &self,
        model: &str,
        messages: &[ChatMessage],
        tools: &[ToolDefinition],
        deadline: tokio::time::Instant,
    ) -> Result<ModelReply, ModelError> {
        let body = Self::body(model, messages, tools);
        self.with_retries(deadline, |timeout| self.attempt(&body, timeout)).await
    }

    /// [`Self::complete`] with `stream: true`: each piece of text goes to `text` as it arrives.
    /// A failure before any text went out is retried as usual; after, it is
    /// [`ModelError::StreamBroken`].
    pub async fn complete_streamed(
        &self,
        model: &str,
        messages: &[ChatMessage],
        tools: &[ToolDefinition],
        deadline: tokio::time::Instant,
        text: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<ModelReply, ModelError> {
        let mut body = Self::body(model, messages, tools);
        body["stream"] = Value::Bool(true);
        body["stream_options"] = json!({"include_usage": true});
        self.with_retries(deadline, |timeout| crate::model_stream::attempt(self, &body, timeout, text)).await
    }

    async fn with_retries<F, Fut>(
        &self,
        deadline: tokio::time::Instant,
        attempt: F,
    ) -> Result<ModelReply, ModelError>
    where
        F: Fn(Duration) -> Fut,
        Fut: std::future::Future<Output = Result<ModelReply, ModelError>>,
    {
        let mut backoff = self.config.initial_backoff;
        let mut tries = 0;
        loop {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            if remaining.is_zero() {
                return Err(ModelError::Timeout);
            }
            match attempt(remaining.min(self.config.call_timeout)).await {
                Err(err) if err.retryable() && tries < self.config.max_retries => {
                    tries += 1;
                    tracing::warn!(code = err.code(), attempt = tries, "model call failed; retrying");
                    let wait = backoff.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
                    tokio::time::sleep(wait).await;
                    backoff = backoff.saturating_mul(2);
                }
                other => return other,
            }
        }
    }

    /// The request for one call, sent: its response once the status says it is an answer.
    pub(crate) async fn send(
        &self,
        body: &Value,
        timeout: Duration,
    ) -> Result<reqwest::Response, ModelError> {
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
        Ok(response)
    }

    async fn attempt(&self, body: &Value, timeout: Duration) -> Result<ModelReply, ModelError> {
        let response = self.send(body, timeout).await?;
        let text = response
            .text()
            .await
            .map_err(|e| if e.is_timeout() { ModelError::Timeout } else { ModelError::Connection })?;
        parse_completion(&text)
    }
}

/// A whole (not streamed) completion's body as a reply.
pub(crate) fn parse_completion(text: &str) -> Result<ModelReply, ModelError> {
    {
        let parsed: CompletionResponse =
            serde_json::from_str(text).map_err(|e| ModelError::InvalidResponse(e.to_string()))?;
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

    async fn complete_streamed(
        &self,
        model: &str,
        messages: &[ChatMessage],
        tools: &[ToolDefinition],
        deadline: tokio::time::Instant,
        text: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<ModelReply, ModelError> {
        ModelClient::complete_streamed(self, model, messages, tools, deadline, text).await
    }
}
