//! The node API's errors, in the `{"error":{"type","code","message",…}}` envelope: every status,
//! code and message of this surface is decided here, by [`NodeError::to_api_error`]. Handlers
//! return `Result<_, NodeError>` and use `?`.

use agentplane_domain::ValidationError;
use agentplane_store::StoreError;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::body::BodyError;
use crate::envelope::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("missing or invalid node token")]
    InvalidToken,
    #[error("missing or invalid node enrollment key")]
    InvalidEnrollmentKey,
    /// The deployment configured no enrollment key: the route does not exist for it.
    #[error("node enrollment is not configured")]
    EnrollmentDisabled,
    #[error("the node's token changed concurrently; rotate again with the token you hold")]
    TokenConflict,
    #[error("the request body could not be taken: {0:?}")]
    Body(BodyError),
    #[error("{}", .0.message)]
    Invalid(#[from] ValidationError),
    #[error("`connection` is required")]
    ConnectionRequired,
    #[error("`wait` must be 0 to 20 seconds")]
    InvalidWait,
    #[error("`connection_id` must be 1 to 64 characters")]
    InvalidConnectionId,
    /// What was looked up (`command`, `node`, `sandbox`) does not exist.
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("the sandbox's observations changed concurrently; send the report again")]
    ReportConflict,
    #[error("the sandbox is not running")]
    SandboxNotRunning,
    #[error("no randomness for a token; try again")]
    Randomness,
    /// A storage failure: the detail goes to the log, never to the node.
    #[error("storage is unavailable; try again")]
    Storage(#[source] StoreError),
}

impl NodeError {
    /// A store result about `what`: `NotFound` is a 404, the rest a 503.
    pub fn lookup(what: &'static str) -> impl FnOnce(StoreError) -> Self {
        move |err| match err {
            StoreError::NotFound => Self::NotFound(what),
            other => other.into(),
        }
    }

    /// The envelope this error is sent in.
    pub fn to_api_error(&self) -> ApiError {
        let invalid = |message: String| {
            ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", "invalid_request_error", message)
        };
        match self {
            Self::InvalidToken => ApiError::new(
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "invalid_node_token",
                self.to_string(),
            ),
            Self::InvalidEnrollmentKey => ApiError::new(
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "invalid_enrollment_key",
                self.to_string(),
            ),
            Self::EnrollmentDisabled => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found_error", "not_found_error", self.to_string())
            }
            Self::TokenConflict => {
                ApiError::new(StatusCode::CONFLICT, "invalid_request_error", "conflict", self.to_string())
            }
            Self::Body(err) => ApiError::from(err.clone()),
            Self::Invalid(err) => ApiError::from(err.clone()),
            Self::ConnectionRequired | Self::InvalidWait | Self::InvalidConnectionId => {
                invalid(self.to_string())
            }
            Self::NotFound(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found_error", "not_found_error", self.to_string())
            }
            Self::SandboxNotRunning => ApiError::new(
                StatusCode::CONFLICT,
                "invalid_request_error",
                "sandbox_not_running",
                self.to_string(),
            ),
            Self::ReportConflict => {
                ApiError::new(StatusCode::CONFLICT, "invalid_request_error", "conflict", self.to_string())
            }
            Self::Randomness => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "api_error",
                "internal_error",
                self.to_string(),
            ),
            Self::Storage(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "service_unavailable",
                self.to_string(),
            ),
        }
    }
}

/// Any storage failure is a 503 (not-found and conflicts included, unless the caller classified
/// them first, e.g. with [`NodeError::lookup`]).
impl From<StoreError> for NodeError {
    fn from(err: StoreError) -> Self {
        tracing::error!(error = %err, "storage call failed");
        Self::Storage(err)
    }
}

/// A use case's port error is a storage error here.
impl From<agentplane_engine::ports::PortError> for NodeError {
    fn from(err: agentplane_engine::ports::PortError) -> Self {
        agentplane_store::StoreError::from(err).into()
    }
}

impl From<agentplane_engine::nodes::HeartbeatError> for NodeError {
    fn from(err: agentplane_engine::nodes::HeartbeatError) -> Self {
        use agentplane_engine::nodes::HeartbeatError;
        match err {
            HeartbeatError::NodeNotFound => Self::NotFound("node"),
            HeartbeatError::Port(err) => err.into(),
        }
    }
}

impl From<getrandom::Error> for NodeError {
    fn from(_: getrandom::Error) -> Self {
        Self::Randomness
    }
}

impl From<BodyError> for NodeError {
    fn from(err: BodyError) -> Self {
        Self::Body(err)
    }
}

impl IntoResponse for NodeError {
    fn into_response(self) -> Response {
        self.to_api_error().into_response()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    async fn rendered(err: NodeError) -> (u16, Value) {
        let response = err.into_response();
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap_or_default();
        (status, serde_json::from_slice(&bytes).unwrap_or_default())
    }

    fn envelope(kind: &str, code: &str, message: &str) -> Value {
        json!({ "error": { "type": kind, "code": code, "message": message } })
    }

    #[tokio::test]
    async fn every_variant_renders_its_status_code_and_message_in_the_envelope() {
        let bad = "invalid_request_error";
        let cases: Vec<(NodeError, u16, Value)> = vec![
            (
                NodeError::InvalidToken,
                401,
                envelope("authentication_error", "invalid_node_token", "missing or invalid node token"),
            ),
            (
                BodyError::TooLarge.into(),
                413,
                envelope(
                    bad,
                    "request_too_large",
                    &format!("the request body exceeds {} bytes", crate::body::MAX_BODY_BYTES),
                ),
            ),
            (
                BodyError::NotAnObject.into(),
                400,
                envelope(bad, "invalid_json", "the request body must be a JSON object"),
            ),
            (
                ValidationError::new("wait", "`wait` may be given at most once").into(),
                400,
                json!({ "error": { "type": bad, "code": bad, "message": "`wait` may be given at most once", "param": "wait" } }),
            ),
            (
                NodeError::InvalidEnrollmentKey,
                401,
                envelope(
                    "authentication_error",
                    "invalid_enrollment_key",
                    "missing or invalid node enrollment key",
                ),
            ),
            (
                NodeError::EnrollmentDisabled,
                404,
                envelope("not_found_error", "not_found_error", "node enrollment is not configured"),
            ),
            (
                NodeError::TokenConflict,
                409,
                envelope(
                    bad,
                    "conflict",
                    "the node's token changed concurrently; rotate again with the token you hold",
                ),
            ),
            (NodeError::ConnectionRequired, 400, envelope(bad, bad, "`connection` is required")),
            (NodeError::InvalidWait, 400, envelope(bad, bad, "`wait` must be 0 to 20 seconds")),
            (
                NodeError::InvalidConnectionId,
                400,
                envelope(bad, bad, "`connection_id` must be 1 to 64 characters"),
            ),
            (
                NodeError::NotFound("command"),
                404,
                envelope("not_found_error", "not_found_error", "command not found"),
            ),
            (
                NodeError::ReportConflict,
                409,
                envelope(
                    bad,
                    "conflict",
                    "the sandbox's observations changed concurrently; send the report again",
                ),
            ),
            (
                NodeError::Randomness,
                500,
                envelope("api_error", "internal_error", "no randomness for a token; try again"),
            ),
            (
                StoreError::Unavailable("down".into()).into(),
                503,
                envelope("api_error", "service_unavailable", "storage is unavailable; try again"),
            ),
        ];
        for (err, status, body) in cases {
            let label = format!("{err:?}");
            assert_eq!(rendered(err).await, (status, body), "{label}");
        }
    }

    #[test]
    fn lookups_turn_not_found_into_a_404_of_what_was_looked_up() {
        assert!(matches!(NodeError::lookup("node")(StoreError::NotFound), NodeError::NotFound("node")));
        assert!(matches!(NodeError::lookup("node")(StoreError::Conflict), NodeError::Storage(_)));
    }
}
