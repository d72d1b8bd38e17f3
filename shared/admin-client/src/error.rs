use thiserror::Error;

/// A malformed observation (a single read).
pub const INVALID_RUNTIME_OBSERVATION: &str = "invalid_runtime_observation";
/// A malformed list page, history, node or error envelope.
pub const INVALID_ADMIN_RESPONSE: &str = "invalid_admin_response";

/// Everything a call can fail with. [`AdminClientError::status`] and [`AdminClientError::code`]
/// give the HTTP-style status and the error code a caller can branch on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AdminClientError {
    /// The query broke a rule the client checks before sending (code `invalid_request`); nothing
    /// was sent.
    #[error("invalid request: {message}")]
    InvalidRequest { param: Option<String>, message: String },
    /// The server answered with its error envelope `{"error":{"type","code","message"}}`.
    #[error("{status} {code}: {message}")]
    Api { status: u16, kind: String, code: String, message: String },
    /// The server's answer broke the spec; treated as 502 with `invalid_runtime_observation` or
    /// `invalid_admin_response`.
    #[error("{code}: {message}")]
    InvalidResponse { code: &'static str, message: String },
    /// The request did not complete (connection, timeout, body read).
    #[error("transport error: {0}")]
    Transport(String),
}

impl AdminClientError {
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::InvalidRequest { .. } => Some(400),
            Self::Api { status, .. } => Some(*status),
            Self::InvalidResponse { .. } => Some(502),
            Self::Transport(_) => None,
        }
    }

    pub fn code(&self) -> &str {
        match self {
            Self::InvalidRequest { .. } => "invalid_request",
            Self::Api { code, .. } => code,
            Self::InvalidResponse { code, .. } => code,
            Self::Transport(_) => "transport_error",
        }
    }

    pub(crate) fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Self::InvalidResponse { code, message: message.into() }
    }
}

impl From<agentplane_domain::ValidationError> for AdminClientError {
    fn from(err: agentplane_domain::ValidationError) -> Self {
        Self::InvalidRequest { param: err.param, message: err.message }
    }
}
