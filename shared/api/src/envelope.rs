//! The `{"error":{"type","code","message",…}}` envelope shared by the client API and Core admin
//! API. Each of those surfaces decides its codes in its own `error` module; this only renders.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// `{"error": {...}}`: every error of the client, Core and node surfaces.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorEnvelope {
    pub error: ErrorObject,
}

/// What went wrong: a class (`type`), a stable `code` and a message for people. Some errors
/// carry more snake_case fields (`param`, the field at fault; `runtime_status`,
/// `action_status`, …): the document allows them.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorObject {
    #[serde(rename = "type")]
    #[schema(example = "invalid_request_error")]
    pub kind: String,
    #[schema(example = "invalid_request_error")]
    pub code: String,
    pub message: String,
    /// The request field at fault, where there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `{"error": "message"}`: the older shape `POST /responses` and `POST /agents/responses` keep
/// for a missing or unknown agent.
#[derive(Debug, Serialize, ToSchema)]
pub struct LegacyError {
    pub error: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub code: &'static str,
    pub message: String,
    /// Extra snake_case fields where they help (`param`, `pending_action_ids`, …).
    pub extra: Map<String, Value>,
    /// The older Responses shape `{"error": "message"}` (a missing or unknown agent).
    pub legacy: bool,
    /// A `Retry-After` header (seconds), for answers that say "not now" (429).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        kind: &'static str,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            kind,
            code,
            message: message.into(),
            extra: Map::new(),
            legacy: false,
            retry_after: None,
        }
    }

    /// `{"error": "message"}`, as the spec keeps for a missing or unknown agent on Responses.
    pub fn legacy(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { legacy: true, ..Self::new(status, "invalid_request_error", code, message) }
    }

    /// Answers with `Retry-After: {seconds}`.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    pub fn with(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(field.to_owned(), value.into());
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.legacy {
            return (self.status, Json(LegacyError { error: self.message })).into_response();
        }
        let mut extra = self.extra;
        let param = extra.remove("param").and_then(|p| p.as_str().map(str::to_owned));
        let error = ErrorObject {
            kind: self.kind.to_owned(),
            code: self.code.to_owned(),
            message: self.message,
            param,
            extra,
        };
        let mut response = (self.status, Json(ErrorEnvelope { error })).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
        }
        response
    }
}

impl From<crate::body::BodyError> for ApiError {
    fn from(err: crate::body::BodyError) -> Self {
        use crate::body::BodyError;
        match err {
            BodyError::TooLarge => Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                "request_too_large",
                format!("the request body exceeds {} bytes", crate::body::MAX_BODY_BYTES),
            ),
            BodyError::Unreadable => Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_json",
                "the request body could not be read",
            ),
            BodyError::InvalidJson(detail) => Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_json",
                format!("the request body is not valid JSON: {detail}"),
            ),
            BodyError::NotAnObject => Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_json",
                "the request body must be a JSON object",
            ),
        }
    }
}

impl From<agentplane_domain::ValidationError> for ApiError {
    fn from(err: agentplane_domain::ValidationError) -> Self {
        let error =
            Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", "invalid_request_error", err.message);
        match err.param {
            Some(param) => error.with("param", param),
            None => error,
        }
    }
}

impl ApiError {
    /// A storage failure other than not-found: the detail goes to the log, never to the client.
    pub fn storage(err: &agentplane_store::StoreError) -> Self {
        tracing::error!(error = %err, "storage call failed");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            "service_unavailable",
            "storage is unavailable; try again",
        )
    }

    pub fn internal(what: &str) -> Self {
        tracing::error!(what, "internal error");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "api_error", "internal_error", "internal error")
    }
}
