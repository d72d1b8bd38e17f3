//! Every status and code of the `/v1` surface, in one `PlatformError` and its one conversion
//! to the envelope `{"error":{"code","message","details"?}}`; the edge guard adds `requestId`
//! (and turns any other producer's error into this envelope too).

use agentplane_domain::ValidationError;
use agentplane_store::StoreError;
use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use agentplane_domain::quota::Cap;

use crate::body::BodyError;

/// `{"error": {...}}`: every error of the `/v1` surface.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlatformErrorEnvelope {
    pub error: PlatformErrorObject,
}

/// A stable `code`, a message for people, the request's id and, for some errors, `details`
/// (for a bad field `{"param": "<field>"}`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlatformErrorObject {
    #[schema(example = "invalid_request")]
    pub code: String,
    pub message: String,
    #[schema(example = "req_0123456789abcdef01234567")]
    pub request_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// 401 `invalid_api_token`.
    #[error("missing, invalid or revoked Platform API token")]
    InvalidToken,
    /// 429 `rate_limit_exceeded`: the token made `max_requests` requests in this window of
    /// `window_seconds`; `Retry-After` says when the window ends.
    #[error("too many requests for this token")]
    RateLimited { max_requests: u32, window_seconds: u32, retry_after_s: u64 },
    /// 409 `quota_exceeded`: the project holds the most of `quota` it may (`max`); deleting one
    /// gives a place back. `details`: `quota`, `max`.
    #[error("the project's {} quota is reached", .quota.name())]
    QuotaExceeded { quota: Cap, max: u64 },
    /// 404 `environment_not_found`.
    #[error("environment not found")]
    EnvironmentNotFound,
    /// 404 `session_not_found`.
    #[error("session not found")]
    SessionNotFound,
    /// 404 `run_not_found`.
    #[error("run not found")]
    RunNotFound,
    /// 404 `snapshot_not_found`: no live environment or Run of the project returned that
    /// checkpoint (a fork's `snapshotId`).
    #[error("snapshot not found")]
    SnapshotNotFound,
    /// 409 `run_reverted`: the Run is reverting or reverted.
    #[error("the run is reverting or reverted")]
    RunReverted,
    /// 409 `rollback_in_progress`: a rollback of the environment is under way.
    #[error("a rollback of the environment is under way")]
    RollbackInProgress,
    /// 409 `checkpoint_unavailable`: the checkpoint a rollback would restore is pending or failed.
    #[error("the checkpoint before the Run is not usable")]
    CheckpointUnavailable { run_id: String, status: agentplane_domain::platform::run::CheckpointStatus },
    /// 409 `concurrent_update`.
    #[error("changed concurrently")]
    ConcurrentUpdate,
    /// 404 `cursor_not_found`.
    #[error("the `after` cursor names no item of this list")]
    CursorNotFound,
    /// 400 `invalid_path`, `details.param` `path`.
    #[error(transparent)]
    InvalidPath(agentplane_domain::platform::path::PathError),
    /// 404 `file_not_found`.
    #[error("file not found")]
    FileNotFound,
    /// 409 `workspace_too_large`: the workspace is past one of the node's caps (depth, entries,
    /// path length, listing size, file size); `details` names the cap and its limit.
    #[error("{}", .0.describe())]
    WorkspaceTooLarge(agentplane_domain::platform::path::refusal::TooLarge),
    /// 413 `file_too_large`.
    #[error("the file is too large")]
    FileTooLarge,
    /// 503 `platform_runtime_unavailable`: the workspace's sandbox cannot be reached now.
    #[error("{0}")]
    RuntimeUnavailable(String),
    /// 400 `invalid_json` / `request_too_large` 413.
    #[error("unreadable body: {0:?}")]
    Body(BodyError),
    /// 400 `invalid_request`, `details.param` naming the field.
    #[error(transparent)]
    Validation(ValidationError),
    /// 503 `service_unavailable`; the detail goes to the log only.
    #[error(transparent)]
    Storage(StoreError),
    /// 500 `internal_error`; the detail goes to the log only.
    #[error("internal error: {0}")]
    Internal(String),
}

impl PlatformError {
    pub fn internal(what: impl Into<String>) -> Self {
        Self::Internal(what.into())
    }

    /// 400 `invalid_request` naming `param`.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Validation(ValidationError::new(param, message))
    }

    fn parts(self) -> (StatusCode, &'static str, String, Option<Value>) {
        use crate::body::MAX_BODY_BYTES;
        match self {
            Self::InvalidToken => (
                StatusCode::UNAUTHORIZED,
                "invalid_api_token",
                "missing, invalid or revoked Platform API token (`Authorization: Bearer cpeer_…`)".into(),
                None,
            ),
            Self::RateLimited { max_requests, window_seconds, retry_after_s } => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_exceeded",
                format!(
                    "this token made {max_requests} requests in {window_seconds} s, the most it may; try again in \
                     {retry_after_s} s"
                ),
                Some(json!({"maxRequests": max_requests, "windowSeconds": window_seconds})),
            ),
            Self::QuotaExceeded { quota, max } => (
                StatusCode::CONFLICT,
                "quota_exceeded",
                format!(
                    "the project holds {max} {}, the most it may (AGENTPLANE_MAX_{}_PER_PROJECT); delete one first",
                    quota.name().replace('_', " "),
                    quota.name().to_uppercase()
                ),
                Some(json!({"quota": quota.name(), "max": max})),
            ),
            Self::EnvironmentNotFound => {
                (StatusCode::NOT_FOUND, "environment_not_found", "environment not found".into(), None)
            }
            Self::SessionNotFound => {
                (StatusCode::NOT_FOUND, "session_not_found", "session not found".into(), None)
            }
            Self::SnapshotNotFound => (
                StatusCode::NOT_FOUND,
                "snapshot_not_found",
                "no environment or Run of this project returned that checkpoint".into(),
                Some(json!({"param": "snapshotId"})),
            ),
            Self::RunNotFound => (StatusCode::NOT_FOUND, "run_not_found", "run not found".into(), None),
            Self::RunReverted => (
                StatusCode::CONFLICT,
                "run_reverted",
                "the Run is reverting or reverted by a rollback".into(),
                None,
            ),
            Self::RollbackInProgress => (
                StatusCode::CONFLICT,
                "rollback_in_progress",
                "a rollback of this environment is under way; try again once it has finished".into(),
                None,
            ),
            Self::CheckpointUnavailable { run_id, status } => (
                StatusCode::CONFLICT,
                "checkpoint_unavailable",
                format!(
                    "the checkpoint before the Run (of Run {run_id}) is {}; nothing was reverted",
                    match status {
                        agentplane_domain::platform::run::CheckpointStatus::Pending => "pending",
                        agentplane_domain::platform::run::CheckpointStatus::Failed => "failed",
                        agentplane_domain::platform::run::CheckpointStatus::Ready => "ready",
                        agentplane_domain::platform::run::CheckpointStatus::Skipped => "skipped",
                    }
                ),
                Some(json!({"runId": run_id})),
            ),
            Self::ConcurrentUpdate => (
                StatusCode::CONFLICT,
                "concurrent_update",
                "the environment changed concurrently; try again".into(),
                None,
            ),
            Self::CursorNotFound => (
                StatusCode::NOT_FOUND,
                "cursor_not_found",
                "the `after` cursor names no item of this list".into(),
                None,
            ),
            Self::InvalidPath(err) => {
                (StatusCode::BAD_REQUEST, "invalid_path", err.to_string(), Some(json!({ "param": "path" })))
            }
            Self::FileNotFound => {
                (StatusCode::NOT_FOUND, "file_not_found", "no such file in the workspace".into(), None)
            }
            Self::WorkspaceTooLarge(too_large) => (
                StatusCode::CONFLICT,
                "workspace_too_large",
                too_large.describe(),
                Some(json!({ "cap": too_large.cap.as_str(), "limit": too_large.limit })),
            ),
            Self::FileTooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "file_too_large",
                format!(
                    "a workspace file may be at most {} bytes",
                    agentplane_engine::platform::MAX_FILE_BYTES
                ),
                None,
            ),
            Self::RuntimeUnavailable(detail) => {
                // The detail can name a node or its address: the log has it, the client a fixed text.
                tracing::warn!(detail, "the workspace's sandbox cannot be reached");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "platform_runtime_unavailable",
                    "the environment's sandbox cannot be reached now; try again".into(),
                    None,
                )
            }
            Self::Body(BodyError::TooLarge) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                format!("the request body exceeds {MAX_BODY_BYTES} bytes"),
                None,
            ),
            Self::Body(BodyError::Unreadable) => {
                (StatusCode::BAD_REQUEST, "invalid_json", "the request body could not be read".into(), None)
            }
            Self::Body(BodyError::InvalidJson(detail)) => (
                StatusCode::BAD_REQUEST,
                "invalid_json",
                format!("the request body is not valid JSON: {detail}"),
                None,
            ),
            Self::Body(BodyError::NotAnObject) => (
                StatusCode::BAD_REQUEST,
                "invalid_json",
                "the request body must be a JSON object".into(),
                None,
            ),
            Self::Validation(err) => {
                let details = err.param.map(|param| json!({ "param": param }));
                (StatusCode::BAD_REQUEST, "invalid_request", err.message, details)
            }
            Self::Storage(err) => {
                tracing::error!(error = %err, "storage call failed");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "service_unavailable",
                    "storage is unavailable; try again".into(),
                    None,
                )
            }
            Self::Internal(what) => {
                tracing::error!(what, "internal error");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal_error", "internal error".into(), None)
            }
        }
    }
}

impl IntoResponse for PlatformError {
    fn into_response(self) -> Response {
        let retry_after = match &self {
            Self::RateLimited { retry_after_s, .. } => Some(*retry_after_s),
            _ => None,
        };
        let (status, code, message, details) = self.parts();
        let mut error = json!({ "code": code, "message": message });
        if let Some(details) = details {
            error["details"] = details;
        }
        let mut response = (status, Json(json!({ "error": error }))).into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
        }
        response
    }
}

impl From<BodyError> for PlatformError {
    fn from(err: BodyError) -> Self {
        Self::Body(err)
    }
}

impl From<ValidationError> for PlatformError {
    fn from(err: ValidationError) -> Self {
        Self::Validation(err)
    }
}

impl From<agentplane_engine::platform::WorkspaceError> for PlatformError {
    fn from(err: agentplane_engine::platform::WorkspaceError) -> Self {
        use agentplane_engine::platform::WorkspaceError;
        match err {
            WorkspaceError::RuntimeUnavailable(detail) => Self::RuntimeUnavailable(detail),
            WorkspaceError::InvalidPath(err) => Self::InvalidPath(err),
            WorkspaceError::FileNotFound => Self::FileNotFound,
            WorkspaceError::TooLarge(too_large) => Self::WorkspaceTooLarge(too_large),
            WorkspaceError::Storage(err) => err.into(),
            WorkspaceError::Internal(what) => Self::Internal(what),
        }
    }
}

impl From<StoreError> for PlatformError {
    fn from(err: StoreError) -> Self {
        Self::Storage(err)
    }
}

/// A use case's port error is a storage error here.
impl From<agentplane_engine::ports::PortError> for PlatformError {
    fn from(err: agentplane_engine::ports::PortError) -> Self {
        agentplane_store::StoreError::from(err).into()
    }
}

impl From<agentplane_engine::platform::submit::RunsError> for PlatformError {
    fn from(err: agentplane_engine::platform::submit::RunsError) -> Self {
        use agentplane_engine::platform::submit::RunsError;
        match err {
            RunsError::EnvironmentNotFound => Self::EnvironmentNotFound,
            RunsError::RunNotFound => Self::RunNotFound,
            RunsError::Reverted => Self::RunReverted,
            RunsError::ConcurrentUpdate => Self::ConcurrentUpdate,
            RunsError::Randomness => Self::internal("randomness unavailable".to_owned()),
            RunsError::Port(err) => err.into(),
        }
    }
}

impl From<agentplane_engine::platform::fork::ForkError> for PlatformError {
    fn from(err: agentplane_engine::platform::fork::ForkError) -> Self {
        use agentplane_engine::platform::fork::ForkError;
        match err {
            ForkError::SnapshotNotFound => Self::SnapshotNotFound,
            ForkError::Randomness(err) => err.into(),
            ForkError::Workspace(err) => err.into(),
            ForkError::Port(err) => err.into(),
        }
    }
}

impl From<agentplane_engine::platform::environments::EnvironmentsError> for PlatformError {
    fn from(err: agentplane_engine::platform::environments::EnvironmentsError) -> Self {
        use agentplane_engine::platform::environments::EnvironmentsError;
        match err {
            EnvironmentsError::NotFound => Self::EnvironmentNotFound,
            EnvironmentsError::LimitReached { max } => {
                Self::QuotaExceeded { quota: Cap::Environments, max: u64::from(max) }
            }
            EnvironmentsError::Fork(err) => err.into(),
            EnvironmentsError::Randomness(err) => err.into(),
            EnvironmentsError::Port(err) => err.into(),
        }
    }
}

impl From<agentplane_engine::platform::files::FilesError> for PlatformError {
    fn from(err: agentplane_engine::platform::files::FilesError) -> Self {
        use agentplane_engine::platform::files::FilesError;
        match err {
            FilesError::RollbackInProgress => Self::RollbackInProgress,
            FilesError::Workspace(err) => err.into(),
        }
    }
}

impl From<getrandom::Error> for PlatformError {
    fn from(err: getrandom::Error) -> Self {
        Self::internal(format!("randomness unavailable: {err}"))
    }
}

pub use crate::found::Found;
