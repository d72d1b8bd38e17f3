//! How client API failures become the agent-runtime envelope: every status and code of this
//! surface is decided here, in one `ClientError` and its one conversion to the envelope.
//! Handlers return `Result<_, ClientError>` and use `?`; store, body, domain and engine errors
//! convert by `From`.

use agentplane_domain::ValidationError;
use agentplane_engine::TurnError;
use agentplane_store::StoreError;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::body::BodyError;
use crate::envelope::ApiError;

mod engine;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// 401 `invalid_api_key`.
    #[error("missing, invalid or revoked API key")]
    InvalidApiKey,
    /// 404 `session_not_found`.
    #[error("session not found")]
    SessionNotFound,
    /// 404 `cursor_not_found`.
    #[error("the `after` cursor names no item of this list")]
    CursorNotFound,
    /// 404 `agent_not_found`.
    #[error("agent not found")]
    AgentNotFound,
    /// 404 `action_not_found`.
    #[error("action not found")]
    ActionNotFound,
    /// 409 `action_not_pending`, with the action's `action_status`.
    #[error("the action is not pending")]
    ActionNotPending { action_status: agentplane_domain::action::ActionStatus },
    /// 403 `answer_not_permitted`: the agent's `humanInTheLoop.answer_key_ids` does not name
    /// the key that answered.
    #[error("this key may not answer the action")]
    AnswerNotPermitted,
    /// 409 `session_busy`, naming the session when known.
    #[error("a turn is already running in this session")]
    SessionBusy { session_id: Option<String> },
    /// 409 `nothing_to_cancel`, with the session's `runtime_status`.
    #[error("no turn is running in this session")]
    NothingToCancel { runtime_status: agentplane_domain::session::RuntimeStatus },
    /// 409 `actions_pending`: the session's turn waits for these actions.
    #[error("the session's turn waits for actions")]
    ActionsPending { pending_action_ids: Vec<String> },
    /// 409 `budget_paused`: the session's turn waits for its budget to be raised.
    #[error("the session's turn is paused by its budget")]
    BudgetPaused { spent_usd: f64, max_cost_usd: Option<f64> },
    /// 400 `model_not_priced`: a budget applies and the model has no price.
    #[error("the model has no price")]
    ModelNotPriced { model: String },
    /// 409 `agent_not_published`.
    #[error("the agent has no published version")]
    AgentNotPublished,
    /// 409 `concurrent_update`.
    #[error("the agent changed meanwhile")]
    ConcurrentUpdate,
    /// The webhook routes' failures (their codes are `crate::webhooks::error`'s).
    #[error(transparent)]
    Webhook(#[from] crate::webhooks::WebhookError),
    /// 404 `run_not_found`.
    #[error("run not found")]
    RunNotFound,
    /// 409 `run_not_active`: the run ended already, with its `run_status`.
    #[error("the run has ended")]
    RunNotActive { run_status: agentplane_domain::agent_run::RunStatus },
    /// 400 `background_not_enabled`: the agent's `config.execution.background_enabled` is off.
    #[error("background runs are off for this agent")]
    BackgroundNotEnabled,
    /// 402 `spend_limit_reached`: the tenant's monthly spend limit is reached.
    #[error("the tenant's monthly spend limit is reached")]
    SpendLimitReached { spent_usd: f64, max_cost_usd: f64 },
    /// 409 `nothing_to_regenerate`: the session has no live turn with a user message.
    #[error("nothing to regenerate")]
    NothingToRegenerate,
    /// 404 `message_not_found`: no such event (an assistant message) in the session.
    #[error("message not found")]
    MessageNotFound,
    /// 404 `file_not_found`.
    #[error("file not found")]
    FileNotFound,
    /// 409 `file_limit_reached`: the session has the most files its agent allows.
    #[error("the session has the most files it may")]
    FileLimitReached { max_files: u32 },
    /// 409 `quota_exceeded` (`quota: "stored_bytes"`): the project stores `stored` bytes of
    /// files and a file of `size` would pass its `max`.
    #[error("the project's stored bytes quota is reached")]
    StoredBytesQuota { max: u64, stored: u64, size: u64 },
    /// 400 `attachments_not_enabled`: the session's agent (the version it runs) takes no files.
    #[error("{0}")]
    AttachmentsNotEnabled(String),
    /// 409 `bucket_not_registered`: the agent's `config.attachments.bucket` (named) is not a
    /// Document Store bucket of the project.
    #[error("bucket `{0}` is not registered to the project")]
    BucketNotRegistered(String),
    /// 429 `rate_limit_exceeded`: the key made `max_requests` requests in this window of
    /// `window_seconds`; `Retry-After` says when the window ends.
    #[error("too many requests for this API key")]
    RateLimited { max_requests: u32, window_seconds: u32, retry_after_s: u64 },
    /// 429 `too_many_streams`: the key (`limit: "key"`) or its project (`limit: "project"`)
    /// has `max_streams` event streams open; `Retry-After` says when to try again.
    #[error("too many open event streams")]
    TooManyStreams { limit: StreamLimitScope, max_streams: u32, retry_after_s: u64 },
    /// 400 `document_too_large`, `document_encrypted` or `document_unreadable`: the document a
    /// file part (`param`) gives has no text to read within the limits.
    #[error("{message}")]
    DocumentRefused { param: String, code: &'static str, message: String },
    /// The request body could not be read as a JSON object (400/413).
    #[error("unreadable body: {0:?}")]
    Body(BodyError),
    /// 400 `invalid_request_error`, naming the parameter.
    #[error(transparent)]
    Validation(ValidationError),
    /// 503 `service_unavailable`; the detail goes to the log only.
    #[error(transparent)]
    Storage(StoreError),
    /// 500 `internal_error`; `what` goes to the log only.
    #[error("internal error: {0}")]
    Internal(String),
    /// The older Responses shape `{"error": "…"}`, 400: `agent` missing or not a string. Only
    /// `POST /responses` and `POST /agents/responses` answer it.
    #[error("{0}")]
    LegacyAgentRequired(&'static str),
    /// The older Responses shape `{"error": "agent `…` not found"}`, 404, quoting what was sent.
    /// Only `POST /responses` and `POST /agents/responses` answer it.
    #[error("agent `{0}` not found")]
    LegacyAgentNotFound(String),
}

/// Which cap refused an event stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamLimitScope {
    Key,
    Project,
}

impl StreamLimitScope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Key => "key",
            Self::Project => "project",
        }
    }
}

impl ClientError {
    pub fn internal(what: impl Into<String>) -> Self {
        Self::Internal(what.into())
    }

    /// The envelope this error is answered with.
    pub fn to_api_error(self) -> ApiError {
        match self {
            Self::InvalidApiKey => ApiError::new(
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "invalid_api_key",
                "missing, invalid or revoked API key",
            ),
            Self::SessionNotFound => ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "session_not_found",
                "session not found",
            ),
            Self::CursorNotFound => ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "cursor_not_found",
                "the `after` cursor names no item of this list",
            ),
            Self::AgentNotFound => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found_error", "agent_not_found", "agent not found")
            }
            Self::ActionNotFound => ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "action_not_found",
                "action not found",
            ),
            Self::AnswerNotPermitted => ApiError::new(
                StatusCode::FORBIDDEN,
                "permission_error",
                "answer_not_permitted",
                "this key may not answer the action: the agent's `humanInTheLoop.answer_key_ids` names the keys that may",
            ),
            Self::ActionNotPending { action_status } => ApiError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "action_not_pending",
                format!("the action is {}: it can no longer be answered", action_status.as_str()),
            )
            .with("action_status", action_status.as_str()),
            Self::SessionBusy { session_id } => {
                let error = ApiError::new(
                    StatusCode::CONFLICT,
                    "conflict_error",
                    "session_busy",
                    "a turn is already running in this session; wait for it to end",
                );
                match session_id {
                    Some(id) => error.with("session_id", id),
                    None => error,
                }
            }
            Self::NothingToCancel { runtime_status } => ApiError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "nothing_to_cancel",
                "no turn is running in this session; there is nothing to cancel",
            )
            .with("runtime_status", serde_json::to_value(runtime_status).unwrap_or_default()),
            Self::ActionsPending { pending_action_ids } => ApiError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "actions_pending",
                "the session's turn waits for actions; answer them (or cancel the turn) before sending a new message",
            )
            .with("pending_action_ids", serde_json::to_value(pending_action_ids).unwrap_or_default()),
            Self::BudgetPaused { spent_usd, max_cost_usd } => ApiError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "budget_paused",
                "the session's turn is paused by its budget; raise the budget (PATCH the session) to carry it on, or cancel it",
            )
            .with("spent_usd", spent_usd)
            .with("max_cost_usd", max_cost_usd.map_or(serde_json::Value::Null, serde_json::Value::from)),
            Self::ModelNotPriced { model } => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "model_not_priced",
                format!(
                    "the model `{}` has no price, and a session budget applies: price it (AGENTPLANE_PRICES_FILE) or remove the budget",
                    crate::edge::quote::quote(&model)
                ),
            ),
            Self::AgentNotPublished => ApiError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "agent_not_published",
                "the agent has no published version; publish it, or call POST /api/client/v1/responses to run the draft",
            ),
            Self::ConcurrentUpdate => ApiError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "concurrent_update",
                "the agent changed meanwhile; try again",
            ),
            Self::Webhook(err) => err.to_api_error(),
            Self::RunNotFound => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found_error", "run_not_found", "run not found")
            }
            Self::RunNotActive { run_status } => ApiError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "run_not_active",
                format!("the run is {}: there is nothing to cancel", run_status.as_str()),
            )
            .with("run_status", run_status.as_str()),
            Self::BackgroundNotEnabled => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "background_not_enabled",
                "background runs are off for this agent: set its `config.execution.background_enabled` to true, or omit `background`",
            )
            .with("param", "background"),
            Self::SpendLimitReached { spent_usd, max_cost_usd } => ApiError::new(
                StatusCode::PAYMENT_REQUIRED,
                "spend_limit_error",
                "spend_limit_reached",
                "the tenant's monthly spend limit is reached; raise it (Core) or wait for the next month",
            )
            .with("spent_usd", spent_usd)
            .with("max_cost_usd", max_cost_usd),
            Self::NothingToRegenerate => ApiError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "nothing_to_regenerate",
                "the session has no answered user message to regenerate",
            ),
            Self::MessageNotFound => ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "message_not_found",
                "no such message in this session",
            ),
            Self::FileNotFound => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found_error", "file_not_found", "file not found")
            }
            Self::StoredBytesQuota { max, stored, size } => ApiError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "quota_exceeded",
                format!(
                    "the project stores {stored} bytes of files; {size} more would pass its {max} \
                     (AGENTPLANE_MAX_STORED_BYTES_PER_PROJECT); delete files first"
                ),
            )
            .with("quota", "stored_bytes")
            .with("max", max)
            .with("stored", stored),
            Self::FileLimitReached { max_files } => ApiError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "file_limit_reached",
                format!(
                    "the session has {max_files} files, the most its agent's `config.attachments.max_files` allows; delete one first"
                ),
            )
            .with("max_files", max_files),
            Self::AttachmentsNotEnabled(message) => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "attachments_not_enabled",
                message,
            ),
            Self::BucketNotRegistered(name) => ApiError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "bucket_not_registered",
                format!(
                    "the agent keeps files in `{name}` (`config.attachments.bucket`), which is not registered to \
                     this project: register it through Core, or set the bucket to null"
                ),
            ),
            Self::RateLimited { max_requests, window_seconds, retry_after_s } => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "rate_limit_exceeded",
                format!(
                    "this API key made {max_requests} requests in {window_seconds} s, the most it may \
                     (AGENTPLANE_RATE_LIMIT_PER_MINUTE); try again in {retry_after_s} s"
                ),
            )
            .with("max_requests", max_requests)
            .with("window_seconds", window_seconds)
            .retry_after(retry_after_s),
            Self::TooManyStreams { limit, max_streams, retry_after_s } => {
                let (whose, setting) = match limit {
                    StreamLimitScope::Key => ("this key", "AGENTPLANE_STREAMS_PER_KEY"),
                    StreamLimitScope::Project => ("this project", "AGENTPLANE_STREAMS_PER_PROJECT"),
                };
                ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limit_error",
                    "too_many_streams",
                    format!(
                        "{whose} has {max_streams} event streams open, the most it may ({setting}); \
                         close one or try again later"
                    ),
                )
                .with("limit", limit.as_str())
                .with("max_streams", max_streams)
                .retry_after(retry_after_s)
            }
            Self::DocumentRefused { param, code, message } => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", code, message)
                    .with("param", param)
            }
            Self::Body(err) => err.into(),
            Self::Validation(err) => err.into(),
            Self::Storage(err) => ApiError::storage(&err),
            Self::Internal(what) => ApiError::internal(&what),
            Self::LegacyAgentRequired(message) => {
                ApiError::legacy(StatusCode::BAD_REQUEST, "agent_required", message)
            }
            Self::LegacyAgentNotFound(text) => ApiError::legacy(
                StatusCode::NOT_FOUND,
                "agent_not_found",
                format!("agent `{}` not found", crate::edge::quote::quote(&text)),
            ),
        }
    }

    /// A turn that could not run in `session_id`.
    pub fn turn(err: TurnError, session_id: String) -> Self {
        match err {
            TurnError::Busy => Self::SessionBusy { session_id: Some(session_id) },
            other => other.into(),
        }
    }
}

impl IntoResponse for ClientError {
    fn into_response(self) -> Response {
        self.to_api_error().into_response()
    }
}

impl From<ClientError> for ApiError {
    fn from(err: ClientError) -> Self {
        err.to_api_error()
    }
}

impl From<BodyError> for ClientError {
    fn from(err: BodyError) -> Self {
        Self::Body(err)
    }
}

impl From<ValidationError> for ClientError {
    fn from(err: ValidationError) -> Self {
        Self::Validation(err)
    }
}

/// Any store failure reached by `?` is a 503; reads where a missing record is the client's 404
/// say which with [`Found`].
impl From<StoreError> for ClientError {
    fn from(err: StoreError) -> Self {
        Self::Storage(err)
    }
}

impl From<getrandom::Error> for ClientError {
    fn from(_: getrandom::Error) -> Self {
        Self::internal("randomness")
    }
}

pub use crate::found::Found;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_variant_has_its_status_and_code() {
        let cases: Vec<(ClientError, StatusCode, &str, &str)> = vec![
            (ClientError::InvalidApiKey, StatusCode::UNAUTHORIZED, "authentication_error", "invalid_api_key"),
            (ClientError::SessionNotFound, StatusCode::NOT_FOUND, "not_found_error", "session_not_found"),
            (ClientError::CursorNotFound, StatusCode::NOT_FOUND, "not_found_error", "cursor_not_found"),
            (ClientError::AgentNotFound, StatusCode::NOT_FOUND, "not_found_error", "agent_not_found"),
            (ClientError::ActionNotFound, StatusCode::NOT_FOUND, "not_found_error", "action_not_found"),
            (
                ClientError::ActionNotPending {
                    action_status: agentplane_domain::action::ActionStatus::Resolved,
                },
                StatusCode::CONFLICT,
                "conflict_error",
                "action_not_pending",
            ),
            (
                ClientError::SessionBusy { session_id: None },
                StatusCode::CONFLICT,
                "conflict_error",
                "session_busy",
            ),
            (ClientError::AgentNotPublished, StatusCode::CONFLICT, "conflict_error", "agent_not_published"),
            (
                ClientError::ActionsPending { pending_action_ids: vec!["act_1".into()] },
                StatusCode::CONFLICT,
                "conflict_error",
                "actions_pending",
            ),
            (ClientError::ConcurrentUpdate, StatusCode::CONFLICT, "conflict_error", "concurrent_update"),
            (
                ClientError::NothingToCancel {
                    runtime_status: agentplane_domain::session::RuntimeStatus::Idle,
                },
                StatusCode::CONFLICT,
                "conflict_error",
                "nothing_to_cancel",
            ),
            (
                ClientError::Body(BodyError::TooLarge),
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                "request_too_large",
            ),
            (
                ClientError::Body(BodyError::InvalidJson("x".into())),
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_json",
            ),
            (
                ClientError::Validation(ValidationError::new("input", "bad")),
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_request_error",
            ),
            (
                ClientError::DocumentRefused {
                    param: "input[0].content[1]".into(),
                    code: "document_encrypted",
                    message: "x".into(),
                },
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "document_encrypted",
            ),
            (
                ClientError::Storage(StoreError::Unavailable("x".into())),
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "service_unavailable",
            ),
            (ClientError::internal("x"), StatusCode::INTERNAL_SERVER_ERROR, "api_error", "internal_error"),
            (
                ClientError::TooManyStreams {
                    limit: StreamLimitScope::Key,
                    max_streams: 2,
                    retry_after_s: 2,
                },
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "too_many_streams",
            ),
            (
                ClientError::LegacyAgentRequired("`agent` is required"),
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "agent_required",
            ),
            (
                ClientError::LegacyAgentNotFound("agt_x".into()),
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                "agent_not_found",
            ),
        ];
        for (err, status, kind, code) in cases {
            let label = format!("{err:?}");
            let legacy =
                matches!(err, ClientError::LegacyAgentRequired(_) | ClientError::LegacyAgentNotFound(_));
            let api = err.to_api_error();
            assert_eq!((api.status, api.kind, api.code), (status, kind, code), "{label}");
            // Only the two legacy variants answer `{"error": "…"}`.
            assert_eq!(api.legacy, legacy, "{label}");
        }
    }

    #[test]
    fn extra_fields_and_messages() {
        let busy = ClientError::SessionBusy { session_id: Some("ses_1".into()) }.to_api_error();
        assert_eq!(serde_json::Value::Object(busy.extra), json!({"session_id": "ses_1"}));
        let idle =
            ClientError::NothingToCancel { runtime_status: agentplane_domain::session::RuntimeStatus::Idle }
                .to_api_error();
        assert_eq!(serde_json::Value::Object(idle.extra), json!({"runtime_status": "idle"}));
        let late =
            ClientError::ActionNotPending { action_status: agentplane_domain::action::ActionStatus::Expired }
                .to_api_error();
        assert_eq!(serde_json::Value::Object(late.extra), json!({"action_status": "expired"}));
        let invalid = ClientError::Validation(ValidationError::new("input", "bad")).to_api_error();
        assert_eq!(serde_json::Value::Object(invalid.extra), json!({"param": "input"}));
        let legacy = ClientError::LegacyAgentNotFound("agt_x".into()).to_api_error();
        assert_eq!(legacy.message, "agent `agt_x` not found");
        let storage = ClientError::Storage(StoreError::Unavailable("secret-host".into())).to_api_error();
        assert_eq!(storage.message, "storage is unavailable; try again");
        assert_eq!(ClientError::internal("secret").to_api_error().message, "internal error");
    }

    #[test]
    fn store_and_engine_errors_convert() {
        let missing = || -> Result<(), StoreError> { Err(StoreError::NotFound) };
        assert!(matches!(
            missing().or_not_found(ClientError::AgentNotFound),
            Err(ClientError::AgentNotFound)
        ));
        let down = || -> Result<(), StoreError> { Err(StoreError::Unavailable("x".into())) };
        assert!(matches!(down().or_not_found(ClientError::AgentNotFound), Err(ClientError::Storage(_))));
        // Plain `?` on a store error is a 503, whatever the error (NotFound included).
        assert!(matches!(ClientError::from(StoreError::NotFound), ClientError::Storage(_)));
        assert!(matches!(ClientError::from(TurnError::SessionNotFound), ClientError::SessionNotFound));
        assert!(matches!(
            ClientError::from(TurnError::Storage(agentplane_engine::ports::PortError::Conflict)),
            ClientError::Storage(_)
        ));
        assert!(matches!(
            ClientError::turn(TurnError::Busy, "ses_1".to_owned()),
            ClientError::SessionBusy { session_id: Some(id) } if id == "ses_1"
        ));
        assert!(matches!(
            ClientError::from(BodyError::NotAnObject),
            ClientError::Body(BodyError::NotAnObject)
        ));
    }

    #[test]
    fn too_many_streams_names_its_cap_and_says_when_to_retry() {
        let api = ClientError::TooManyStreams {
            limit: StreamLimitScope::Project,
            max_streams: 500,
            retry_after_s: 2,
        }
        .to_api_error();
        assert_eq!(
            serde_json::Value::Object(api.extra.clone()),
            json!({"limit": "project", "max_streams": 500})
        );
        let response = api.into_response();
        assert_eq!(
            response.headers().get(http::header::RETRY_AFTER).and_then(|v| v.to_str().ok()),
            Some("2")
        );
    }

    #[test]
    fn the_legacy_shape_is_a_bare_message() {
        let response = ClientError::LegacyAgentRequired("`agent` is required").into_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let response = ClientError::AgentNotFound.into_response();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
    }
}
