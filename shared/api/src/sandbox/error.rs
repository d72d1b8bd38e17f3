//! The E2B error format of the sandbox API, `{"code": <http status>, "message": …}`: every
//! status and message of this surface is decided here, by [`SandboxError::status`] and the
//! variant's `Display`. Handlers return `Result<_, SandboxError>` and use `?`.

use agentplane_domain::SessionId;
use agentplane_domain::ValidationError;
use agentplane_domain::sandbox::LifecycleError;
use agentplane_domain::sandbox::SandboxState;
use agentplane_store::StoreError;
use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use crate::body::{BodyError, MAX_BODY_BYTES};
use crate::envelope::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("missing, invalid or revoked API key")]
    Unauthorized,
    /// The key could not be checked (storage): the client auth's status and message, as is.
    #[error("{}", .0.message)]
    Auth(ApiError),
    /// 429: the key made `max_requests` requests in this window; `Retry-After` says when it ends.
    #[error(
        "this API key made {max_requests} requests in {window_seconds} s, the most it may; try again in {retry_after_s} s"
    )]
    RateLimited { max_requests: u32, window_seconds: u32, retry_after_s: u64 },
    /// 429 (E2B's answer when a team has its most concurrent sandboxes: the SDK raises its
    /// `RateLimitException`): the project has `max` live sandboxes of the sandbox API.
    #[error(
        "the project has {max} live sandboxes, the most it may (AGENTPLANE_MAX_SANDBOXES_PER_PROJECT); kill one to start another"
    )]
    SandboxLimit { max: u32 },
    #[error("sandbox not found")]
    SandboxNotFound,
    #[error("process not found")]
    ProcessNotFound,
    #[error("{}", body_message(.0))]
    Body(BodyError),
    #[error("{}", .0.message)]
    Invalid(#[from] ValidationError),
    #[error("unknown query parameter `{0}`")]
    UnknownQueryParameter(String),
    #[error("`state` must be live, exited or all")]
    InvalidStateFilter,
    #[error("`cursor` is not a cursor this API handed out")]
    InvalidCursor,
    #[error("`limit` must be an integer from 1 to 1024")]
    InvalidLimit,
    #[error("{0}")]
    Lifecycle(#[from] LifecycleError),
    #[error("the sandbox changed concurrently; try again")]
    ChangedConcurrently,
    /// The process counter refused a new process: the sandbox stopped meanwhile.
    #[error("the sandbox is not running")]
    NotRunning,
    /// Processes start only in a running sandbox; this one is paused, expired or killed.
    #[error("the sandbox {}", stopped_message(*.0))]
    Stopped(SandboxState),
    #[error("this sandbox is the managed compute of session {0}; it ends when the session is deleted")]
    ManagedCompute(SessionId),
    #[error(
        "this sandbox holds the workspace of Platform environment {0}; it ends when the environment is deleted"
    )]
    EnvironmentWorkspace(String),
    #[error("no sandbox node is online")]
    NoNodeOnline,
    /// Envd access tokens are sealed with the deployment's secret key; this deployment has none.
    #[error("this deployment has no key to seal sandbox access tokens with")]
    NoSealKey,
    #[error("the sandbox's node did not answer in time; try again")]
    NodeTimeout,
    #[error("the sandbox node could not do it: {0}")]
    NodeRefused(String),
    #[error("the process could not be started: {0}")]
    ProcessNotStarted(String),
    /// A storage failure: the detail goes to the log, never to the client.
    #[error("storage is unavailable; try again")]
    Storage(#[source] StoreError),
    #[error("internal error")]
    Internal(&'static str),
}

fn body_message(err: &BodyError) -> String {
    match err {
        BodyError::TooLarge => format!("the request body exceeds {MAX_BODY_BYTES} bytes"),
        BodyError::Unreadable => "the request body could not be read".to_owned(),
        BodyError::InvalidJson(detail) => format!("the request body is not valid JSON: {detail}"),
        BodyError::NotAnObject => "the request body must be a JSON object".to_owned(),
    }
}

fn stopped_message(state: SandboxState) -> &'static str {
    match state {
        SandboxState::Paused => "is paused",
        SandboxState::Expired => "has expired",
        SandboxState::Killed => "was killed",
        SandboxState::Running => "is running",
    }
}

impl SandboxError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Auth(err) => err.status,
            Self::RateLimited { .. } | Self::SandboxLimit { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::SandboxNotFound | Self::ProcessNotFound => StatusCode::NOT_FOUND,
            Self::Body(BodyError::TooLarge) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Body(_)
            | Self::Invalid(_)
            | Self::UnknownQueryParameter(_)
            | Self::InvalidStateFilter
            | Self::InvalidCursor
            | Self::InvalidLimit => StatusCode::BAD_REQUEST,
            Self::Lifecycle(_)
            | Self::ChangedConcurrently
            | Self::NotRunning
            | Self::Stopped(_)
            | Self::ManagedCompute(_)
            | Self::EnvironmentWorkspace(_) => StatusCode::CONFLICT,
            Self::NoNodeOnline
            | Self::NoSealKey
            | Self::NodeTimeout
            | Self::NodeRefused(_)
            | Self::ProcessNotStarted(_)
            | Self::Storage(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A store result about a sandbox: `NotFound` is a 404, the rest a 503.
    pub fn sandbox_lookup(err: StoreError) -> Self {
        match err {
            StoreError::NotFound => Self::SandboxNotFound,
            other => other.into(),
        }
    }

    /// A store result about a process: `NotFound` is a 404, the rest a 503.
    pub fn process_lookup(err: StoreError) -> Self {
        match err {
            StoreError::NotFound => Self::ProcessNotFound,
            other => other.into(),
        }
    }

    /// A conditional write on a sandbox: losing the race is a 409, the rest a 503.
    pub fn sandbox_write(err: StoreError) -> Self {
        match err {
            StoreError::Conflict => Self::ChangedConcurrently,
            other => other.into(),
        }
    }
}

/// Any storage failure is a 503 (not-found and conflicts included, unless the caller classified
/// them first with [`SandboxError::sandbox_lookup`] and friends).
impl From<StoreError> for SandboxError {
    fn from(err: StoreError) -> Self {
        tracing::error!(error = %err, "storage call failed");
        Self::Storage(err)
    }
}

/// A use case's port error is a storage error here.
impl From<agentplane_engine::ports::PortError> for SandboxError {
    fn from(err: agentplane_engine::ports::PortError) -> Self {
        agentplane_store::StoreError::from(err).into()
    }
}

impl From<agentplane_engine::sandboxes::SandboxFailure> for SandboxError {
    fn from(err: agentplane_engine::sandboxes::SandboxFailure) -> Self {
        use agentplane_engine::sandboxes::SandboxFailure;
        match err {
            SandboxFailure::NotFound => Self::SandboxNotFound,
            SandboxFailure::NoNodeOnline => Self::NoNodeOnline,
            SandboxFailure::NodeRefused(message) => Self::NodeRefused(message),
            SandboxFailure::Randomness => Self::Internal("randomness"),
            SandboxFailure::QuotaExceeded { max } => Self::SandboxLimit { max },
            SandboxFailure::EnvdToken(err) => {
                tracing::error!(error = %err, "envd access token");
                Self::Internal("envd access token")
            }
            SandboxFailure::Lifecycle(err) => err.into(),
            SandboxFailure::Dispatch(err) => err.into(),
            SandboxFailure::Write(err) => Self::sandbox_write(err.into()),
            SandboxFailure::Port(err) => err.into(),
        }
    }
}

impl From<agentplane_engine::processes::ProcessError> for SandboxError {
    fn from(err: agentplane_engine::processes::ProcessError) -> Self {
        use agentplane_engine::processes::ProcessError;
        match err {
            ProcessError::Stopped(state) => Self::Stopped(state),
            ProcessError::NotRunning => Self::NotRunning,
            ProcessError::NotStarted(message) => Self::ProcessNotStarted(message),
            ProcessError::ProcessNotFound => Self::ProcessNotFound,
            ProcessError::Dispatch(err) => err.into(),
            ProcessError::Port(err) => err.into(),
        }
    }
}

impl From<agentplane_engine::dispatch::DispatchError> for SandboxError {
    fn from(err: agentplane_engine::dispatch::DispatchError) -> Self {
        match err {
            agentplane_engine::dispatch::DispatchError::NodeTimeout => Self::NodeTimeout,
            agentplane_engine::dispatch::DispatchError::Storage(err) => err.into(),
        }
    }
}

impl From<BodyError> for SandboxError {
    fn from(err: BodyError) -> Self {
        Self::Body(err)
    }
}

/// The client API's key check: a rejected key is this surface's 401; anything else (storage)
/// keeps its status and message.
impl From<ApiError> for SandboxError {
    fn from(err: ApiError) -> Self {
        if err.status == StatusCode::UNAUTHORIZED { Self::Unauthorized } else { Self::Auth(err) }
    }
}

/// E2B's error body, `{"code": <http status>, "message": …}`: every error of the sandbox API.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SandboxError)]
pub struct E2bError {
    /// The HTTP status, repeated.
    #[schema(example = 404)]
    pub code: u16,
    /// What went wrong, for people.
    #[schema(example = "sandbox not found")]
    pub message: String,
}

impl IntoResponse for SandboxError {
    fn into_response(self) -> Response {
        if let Self::Internal(what) = &self {
            tracing::error!(what, "internal error");
        }
        let status = self.status();
        let retry_after = match &self {
            Self::RateLimited { retry_after_s, .. } => Some(*retry_after_s),
            _ => None,
        };
        let mut response =
            (status, Json(E2bError { code: status.as_u16(), message: self.to_string() })).into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    async fn rendered(err: SandboxError) -> (u16, serde_json::Value) {
        let response = err.into_response();
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap_or_default();
        (status, serde_json::from_slice(&bytes).unwrap_or_default())
    }

    #[tokio::test]
    async fn every_variant_renders_its_status_as_the_e2b_code_with_its_message() {
        let session: SessionId = SessionId::from_random([7; 16]);
        let cases: Vec<(SandboxError, u16, String)> = vec![
            (SandboxError::Unauthorized, 401, "missing, invalid or revoked API key".into()),
            (
                ApiError::storage(&StoreError::Unavailable("down".into())).into(),
                503,
                "storage is unavailable; try again".into(),
            ),
            (
                ApiError::new(StatusCode::UNAUTHORIZED, "authentication_error", "invalid_api_key", "x")
                    .into(),
                401,
                "missing, invalid or revoked API key".into(),
            ),
            (SandboxError::SandboxNotFound, 404, "sandbox not found".into()),
            (SandboxError::ProcessNotFound, 404, "process not found".into()),
            (BodyError::TooLarge.into(), 413, format!("the request body exceeds {MAX_BODY_BYTES} bytes")),
            (BodyError::Unreadable.into(), 400, "the request body could not be read".into()),
            (
                BodyError::InvalidJson("eof".into()).into(),
                400,
                "the request body is not valid JSON: eof".into(),
            ),
            (BodyError::NotAnObject.into(), 400, "the request body must be a JSON object".into()),
            (ValidationError::new("timeout", "bad timeout").into(), 400, "bad timeout".into()),
            (SandboxError::UnknownQueryParameter("x".into()), 400, "unknown query parameter `x`".into()),
            (SandboxError::InvalidStateFilter, 400, "`state` must be live, exited or all".into()),
            (SandboxError::InvalidCursor, 400, "`cursor` is not a cursor this API handed out".into()),
            (SandboxError::InvalidLimit, 400, "`limit` must be an integer from 1 to 1024".into()),
            (LifecycleError::Killed.into(), 409, LifecycleError::Killed.to_string()),
            (SandboxError::ChangedConcurrently, 409, "the sandbox changed concurrently; try again".into()),
            (SandboxError::NotRunning, 409, "the sandbox is not running".into()),
            (SandboxError::Stopped(SandboxState::Paused), 409, "the sandbox is paused".into()),
            (SandboxError::Stopped(SandboxState::Expired), 409, "the sandbox has expired".into()),
            (SandboxError::Stopped(SandboxState::Killed), 409, "the sandbox was killed".into()),
            (
                SandboxError::ManagedCompute(session),
                409,
                format!(
                    "this sandbox is the managed compute of session {session}; it ends when the session is deleted"
                ),
            ),
            (
                SandboxError::EnvironmentWorkspace("e-1".into()),
                409,
                "this sandbox holds the workspace of Platform environment e-1; it ends when the environment is deleted".into(),
            ),
            (SandboxError::NoNodeOnline, 503, "no sandbox node is online".into()),
            (
                SandboxError::NoSealKey,
                503,
                "this deployment has no key to seal sandbox access tokens with".into(),
            ),
            (SandboxError::NodeTimeout, 503, "the sandbox's node did not answer in time; try again".into()),
            (SandboxError::NodeRefused("no".into()), 503, "the sandbox node could not do it: no".into()),
            (
                SandboxError::ProcessNotStarted("no".into()),
                503,
                "the process could not be started: no".into(),
            ),
            (StoreError::Unavailable("down".into()).into(), 503, "storage is unavailable; try again".into()),
            (StoreError::NotFound.into(), 503, "storage is unavailable; try again".into()),
            (SandboxError::Internal("randomness"), 500, "internal error".into()),
        ];
        for (err, status, message) in cases {
            let label = format!("{err:?}");
            assert_eq!(
                rendered(err).await,
                (status, json!({ "code": status, "message": message })),
                "{label}"
            );
        }
    }

    #[test]
    fn store_errors_are_classified_where_the_caller_knows_what_was_looked_up() {
        assert!(matches!(SandboxError::sandbox_lookup(StoreError::NotFound), SandboxError::SandboxNotFound));
        assert!(matches!(SandboxError::process_lookup(StoreError::NotFound), SandboxError::ProcessNotFound));
        assert!(matches!(
            SandboxError::sandbox_write(StoreError::Conflict),
            SandboxError::ChangedConcurrently
        ));
        let classifiers: [fn(StoreError) -> SandboxError; 3] =
            [SandboxError::sandbox_lookup, SandboxError::process_lookup, SandboxError::sandbox_write];
        for classify in classifiers {
            assert_eq!(
                classify(StoreError::Unavailable("down".into())).status(),
                StatusCode::SERVICE_UNAVAILABLE
            );
        }
        assert_eq!(
            SandboxError::sandbox_lookup(StoreError::Conflict).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
}
