//! One GET with the Core key, and the error envelope.

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::{AdminClientError, INVALID_ADMIN_RESPONSE};

/// The largest body the client reads. The largest valid history (10,000 points plus token usage)
/// is a few MiB.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone)]
pub(crate) struct Transport {
    http: reqwest::Client,
    base_url: String,
    core_key: String,
}

#[derive(Deserialize)]
struct Envelope {
    error: EnvelopeError,
}

/// Extra fields (`param`, …) are allowed in the envelope; the three named ones are required.
#[derive(Deserialize)]
struct EnvelopeError {
    #[serde(rename = "type")]
    kind: String,
    code: String,
    message: String,
}

impl Transport {
    pub(crate) fn new(http: reqwest::Client, base_url: &str, core_key: &str) -> Self {
        Self { http, base_url: base_url.trim_end_matches('/').to_owned(), core_key: core_key.to_owned() }
    }

    /// GETs `path_and_query` and decodes a 2xx body as `T` (exact fields); a decoding failure is
    /// an invalid response with `invalid_code`.
    pub(crate) async fn get<T: DeserializeOwned>(
        &self,
        path_and_query: &str,
        invalid_code: &'static str,
    ) -> Result<T, AdminClientError> {
        let url = format!("{}{}", self.base_url, path_and_query);
        let response = self
            .http
            .get(url)
            .bearer_auth(&self.core_key)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| AdminClientError::Transport(e.to_string()))?;
        let status = response.status();
        if response.content_length().is_some_and(|n| n > MAX_RESPONSE_BYTES as u64) {
            return Err(AdminClientError::invalid(INVALID_ADMIN_RESPONSE, "the response is too large"));
        }
        let body = response.bytes().await.map_err(|e| AdminClientError::Transport(e.to_string()))?;
        if body.len() > MAX_RESPONSE_BYTES {
            return Err(AdminClientError::invalid(INVALID_ADMIN_RESPONSE, "the response is too large"));
        }
        if !status.is_success() {
            return Err(match serde_json::from_slice::<Envelope>(&body) {
                Ok(Envelope { error }) => AdminClientError::Api {
                    status: status.as_u16(),
                    kind: error.kind,
                    code: error.code,
                    message: error.message,
                },
                Err(_) => AdminClientError::invalid(
                    INVALID_ADMIN_RESPONSE,
                    format!("status {} without a Core error envelope", status.as_u16()),
                ),
            });
        }
        serde_json::from_slice(&body).map_err(|e| AdminClientError::invalid(invalid_code, e.to_string()))
    }
}
