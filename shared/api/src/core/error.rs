//! How Core admin failures become the Core envelope: every status and code of this surface is
//! decided here, in one `CoreError` and its one conversion to the envelope. Handlers return
//! `Result<_, CoreError>` and use `?`; store, body and domain errors convert by `From`.

use agentplane_domain::ValidationError;
use agentplane_domain::telemetry::observation::ObservationError;
use agentplane_domain::telemetry::{HistoryError, HistoryQueryError};
use agentplane_store::StoreError;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::body::BodyError;
use crate::envelope::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// 401 `invalid_admin_key`.
    #[error("missing or invalid Core key")]
    InvalidAdminKey,
    /// 404 `not_found_error`, "{what} not found".
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The request body could not be read as a JSON object (400/413).
    #[error("unreadable body: {0:?}")]
    Body(BodyError),
    /// 400 `invalid_request_error`, naming the parameter.
    #[error(transparent)]
    Validation(ValidationError),
    /// 400 `invalid_request` (the node reads' query and path checks), naming the parameter.
    #[error("invalid request: {0}")]
    InvalidRequest(ValidationError),
    /// 400 `unsupported_parameter` (the single runtime observation accepts no query).
    #[error("unsupported parameter: {0}")]
    UnsupportedParameter(ValidationError),
    /// 400 with the history query's own code.
    #[error(transparent)]
    HistoryQuery(HistoryQueryError),
    /// 409 `runtime_history_unsupported`.
    #[error("runtime history exists only for openai_hosted sessions")]
    HistoryUnsupported,
    /// 503 `runtime_history_unavailable`. The cause is never kept, returned or logged.
    #[error("runtime history is unavailable")]
    HistoryUnavailable,
    /// 503 `execution_unavailable` (the observation list's collection budget ran out).
    #[error("the observation list exceeded its collection budget")]
    ExecutionUnavailable,
    /// 400 `bucket_not_allowed`: a bucket name outside the deployment's `DocumentBuckets`
    /// pattern, or one of its own buckets.
    #[error("bucket not allowed: {0}")]
    BucketNotAllowed(String),
    /// 400 `bucket_unreachable`: no such bucket, or the deployment's role may not use it.
    #[error("bucket unreachable: {0}")]
    BucketUnreachable(String),
    /// 409 with the code (`bucket_already_registered`, `bucket_taken`, `bucket_limit_reached`).
    #[error("{1}")]
    BucketConflict(&'static str, String),
    /// 409 `conflict`: a concurrent change won; the message says what to do.
    #[error("{0}")]
    Conflict(&'static str),
    /// The tenant webhook routes' failures (their codes are `crate::webhooks::error`'s).
    #[error(transparent)]
    Webhook(#[from] crate::webhooks::WebhookError),
    /// 503 `service_unavailable`; the detail goes to the log only.
    #[error(transparent)]
    Storage(StoreError),
    /// 500 `internal_error`; `what` goes to the log only.
    #[error("internal error: {0}")]
    Internal(String),
}

impl CoreError {
    pub fn internal(what: impl Into<String>) -> Self {
        Self::Internal(what.into())
    }

    /// The envelope this error is answered with (status, type, code, message, extra fields).
    pub fn to_api_error(self) -> ApiError {
        match self {
            Self::InvalidAdminKey => ApiError::new(
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "invalid_admin_key",
                "missing or invalid Core key",
            ),
            Self::NotFound(what) => ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "not_found_error",
                format!("{what} not found"),
            ),
            Self::Body(err) => err.into(),
            Self::Validation(err) => err.into(),
            Self::InvalidRequest(err) => with_param(
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "invalid_request",
                    err.message,
                ),
                err.param,
            ),
            Self::UnsupportedParameter(err) => with_param(
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "unsupported_parameter",
                    err.message,
                ),
                err.param,
            ),
            Self::HistoryQuery(err) => {
                let code = err.code();
                let v = err.validation().clone();
                with_param(
                    ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", code, v.message),
                    v.param,
                )
            }
            Self::HistoryUnsupported => ApiError::new(
                StatusCode::CONFLICT,
                "invalid_request_error",
                "runtime_history_unsupported",
                "runtime history exists only for openai_hosted sessions",
            ),
            Self::HistoryUnavailable => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "runtime_history_unavailable",
                "runtime history is unavailable; try again later",
            ),
            Self::ExecutionUnavailable => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "execution_unavailable",
                "the observation list exceeded its collection budget; try a smaller limit",
            ),
            Self::BucketNotAllowed(message) => with_param(
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "bucket_not_allowed",
                    message,
                ),
                Some("name".into()),
            ),
            Self::BucketUnreachable(message) => with_param(
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "bucket_unreachable",
                    message,
                ),
                Some("name".into()),
            ),
            Self::BucketConflict(code, message) => {
                ApiError::new(StatusCode::CONFLICT, "invalid_request_error", code, message)
            }
            Self::Conflict(message) => {
                ApiError::new(StatusCode::CONFLICT, "invalid_request_error", "conflict", message.to_owned())
            }
            Self::Webhook(err) => err.to_api_error(),
            Self::Storage(err) => ApiError::storage(&err),
            Self::Internal(what) => ApiError::internal(&what),
        }
    }
}

fn with_param(error: ApiError, param: Option<String>) -> ApiError {
    match param {
        Some(param) => error.with("param", param),
        None => error,
    }
}

impl IntoResponse for CoreError {
    fn into_response(self) -> Response {
        self.to_api_error().into_response()
    }
}

impl From<CoreError> for ApiError {
    fn from(err: CoreError) -> Self {
        err.to_api_error()
    }
}

impl From<BodyError> for CoreError {
    fn from(err: BodyError) -> Self {
        Self::Body(err)
    }
}

impl From<ValidationError> for CoreError {
    fn from(err: ValidationError) -> Self {
        Self::Validation(err)
    }
}

impl From<HistoryQueryError> for CoreError {
    fn from(err: HistoryQueryError) -> Self {
        Self::HistoryQuery(err)
    }
}

/// A history that cannot be built from stored samples: an identity disagreement is a 500, any
/// other failure a 503 `runtime_history_unavailable`.
impl From<HistoryError> for CoreError {
    fn from(err: HistoryError) -> Self {
        match err {
            HistoryError::InconsistentIdentity(_) => Self::internal("inconsistent stored runtime identity"),
            HistoryError::InvalidSample | HistoryError::TooLarge => Self::HistoryUnavailable,
        }
    }
}

impl From<ObservationError> for CoreError {
    fn from(err: ObservationError) -> Self {
        Self::Internal(err.to_string())
    }
}

/// Any store failure reached by `?` is a 503; reads where a missing record is the client's 404
/// say so with [`Found::or_not_found`].
impl From<StoreError> for CoreError {
    fn from(err: StoreError) -> Self {
        Self::Storage(err)
    }
}

/// A use case's port error is a storage error here.
impl From<agentplane_engine::ports::PortError> for CoreError {
    fn from(err: agentplane_engine::ports::PortError) -> Self {
        agentplane_store::StoreError::from(err).into()
    }
}

impl From<agentplane_engine::tenants::TenantError> for CoreError {
    fn from(err: agentplane_engine::tenants::TenantError) -> Self {
        use agentplane_engine::tenants::TenantError;
        match err {
            TenantError::NotFound => Self::NotFound("tenant"),
            TenantError::Randomness => Self::internal("randomness"),
            TenantError::Port(err) => err.into(),
        }
    }
}

impl From<agentplane_engine::tenants::AttachError> for CoreError {
    fn from(err: agentplane_engine::tenants::AttachError) -> Self {
        use agentplane_engine::tenants::AttachError;
        match err {
            AttachError::NotFound => Self::NotFound("tenant or project"),
            AttachError::EndpointLimit => crate::webhooks::WebhookError::LimitReached.into(),
            AttachError::Port(err) => err.into(),
        }
    }
}

impl From<agentplane_engine::buckets::BucketError> for CoreError {
    fn from(err: agentplane_engine::buckets::BucketError) -> Self {
        use agentplane_domain::bucket::MAX_BUCKETS_PER_PROJECT;
        use agentplane_engine::buckets::BucketError;
        match err {
            BucketError::OwnBucket(name) => Self::BucketNotAllowed(format!(
                "`{name}` is one of this deployment's own buckets; register a bucket of the project's own"
            )),
            BucketError::NotAllowed { name, pattern } => Self::BucketNotAllowed(format!(
                "`{name}` does not match this deployment's DocumentBuckets pattern `{pattern}` (the buckets its \
                 functions are granted)"
            )),
            BucketError::ProjectNotFound => Self::NotFound("project"),
            BucketError::Missing(name) => {
                Self::BucketUnreachable(format!("no bucket `{name}` exists in this region"))
            }
            BucketError::Forbidden(name) => Self::BucketUnreachable(format!(
                "this deployment may not use `{name}` (access denied, or the bucket is in another region)"
            )),
            BucketError::Registered(name) => Self::BucketConflict(
                "bucket_already_registered",
                format!("the project has `{name}` registered already"),
            ),
            BucketError::Taken(name) => {
                Self::BucketConflict("bucket_taken", format!("`{name}` is registered to another project"))
            }
            BucketError::Full => Self::BucketConflict(
                "bucket_limit_reached",
                format!("a project may register at most {MAX_BUCKETS_PER_PROJECT} buckets"),
            ),
            BucketError::Port(err) => err.into(),
        }
    }
}

impl From<getrandom::Error> for CoreError {
    fn from(_: getrandom::Error) -> Self {
        Self::internal("randomness")
    }
}

pub use crate::found::Found;

/// Store reads for the runtime history routes.
pub trait HistoryFound<T> {
    /// `NotFound` is a 404 naming `what`; any other failure a 503 `runtime_history_unavailable`
    /// whose cause is dropped unread.
    fn or_history_unavailable(self, what: &'static str) -> Result<T, CoreError>;
}

impl<T> HistoryFound<T> for Result<T, StoreError> {
    fn or_history_unavailable(self, what: &'static str) -> Result<T, CoreError> {
        self.map_err(|err| match err {
            StoreError::NotFound => CoreError::NotFound(what),
            _ => CoreError::HistoryUnavailable,
        })
    }
}

#[cfg(test)]
mod tests {
    use agentplane_domain::telemetry::AllocationId;
    use serde_json::json;

    use super::*;

    fn envelope(err: CoreError) -> (StatusCode, &'static str, &'static str, String, serde_json::Value) {
        let api = err.to_api_error();
        (api.status, api.kind, api.code, api.message, serde_json::Value::Object(api.extra))
    }

    fn param(name: &str) -> ValidationError {
        ValidationError::new(name, "bad value")
    }

    #[test]
    fn each_variant_has_its_status_and_code() {
        let none = json!({});
        let cases: Vec<(CoreError, StatusCode, &str, &str)> = vec![
            (
                CoreError::InvalidAdminKey,
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "invalid_admin_key",
            ),
            (CoreError::NotFound("project"), StatusCode::NOT_FOUND, "not_found_error", "not_found_error"),
            (
                CoreError::Body(BodyError::TooLarge),
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                "request_too_large",
            ),
            (
                CoreError::Body(BodyError::NotAnObject),
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_json",
            ),
            (
                CoreError::Validation(param("name")),
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_request_error",
            ),
            (
                CoreError::InvalidRequest(param("range")),
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_request",
            ),
            (
                CoreError::UnsupportedParameter(param("x")),
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "unsupported_parameter",
            ),
            (
                CoreError::HistoryQuery(HistoryQueryError::InvalidRequest(param("start"))),
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_request",
            ),
            (
                CoreError::HistoryQuery(HistoryQueryError::UnsupportedParameter(param("x"))),
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "unsupported_parameter",
            ),
            (
                CoreError::HistoryUnsupported,
                StatusCode::CONFLICT,
                "invalid_request_error",
                "runtime_history_unsupported",
            ),
            (
                CoreError::HistoryUnavailable,
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "runtime_history_unavailable",
            ),
            (
                CoreError::ExecutionUnavailable,
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "execution_unavailable",
            ),
            (
                CoreError::Storage(StoreError::Unavailable("dynamo said no".into())),
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "service_unavailable",
            ),
            (CoreError::internal("detail"), StatusCode::INTERNAL_SERVER_ERROR, "api_error", "internal_error"),
        ];
        for (err, status, kind, code) in cases {
            let label = format!("{err:?}");
            let (s, k, c, _, _) = envelope(err);
            assert_eq!((s, k, c), (status, kind, code), "{label}");
        }
        // Only the validation variants name a parameter.
        assert_eq!(envelope(CoreError::InvalidAdminKey).4, none);
        assert_eq!(envelope(CoreError::Validation(param("name"))).4, json!({"param": "name"}));
        assert_eq!(envelope(CoreError::InvalidRequest(param("range"))).4, json!({"param": "range"}));
        assert_eq!(envelope(CoreError::UnsupportedParameter(param("x"))).4, json!({"param": "x"}));
        assert_eq!(
            envelope(CoreError::HistoryQuery(HistoryQueryError::InvalidRequest(param("start")))).4,
            json!({"param": "start"})
        );
    }

    #[test]
    fn messages_never_carry_storage_or_internal_detail() {
        let (_, _, _, message, _) =
            envelope(CoreError::Storage(StoreError::Unavailable("secret-host".into())));
        assert_eq!(message, "storage is unavailable; try again");
        let (_, _, _, message, _) = envelope(CoreError::internal("secret detail"));
        assert_eq!(message, "internal error");
        let (_, _, _, message, _) = envelope(CoreError::NotFound("api key"));
        assert_eq!(message, "api key not found");
    }

    #[test]
    fn store_reads_map_not_found_to_the_named_404() {
        let missing = || -> Result<(), StoreError> { Err(StoreError::NotFound) };
        assert!(matches!(
            missing().or_not_found(CoreError::NotFound("node")),
            Err(CoreError::NotFound("node"))
        ));
        assert!(matches!(missing().or_history_unavailable("session"), Err(CoreError::NotFound("session"))));
        let down = || -> Result<(), StoreError> { Err(StoreError::Unavailable("x".into())) };
        assert!(matches!(down().or_not_found(CoreError::NotFound("node")), Err(CoreError::Storage(_))));
        assert!(matches!(down().or_history_unavailable("session"), Err(CoreError::HistoryUnavailable)));
        // Plain `?` on a store error is a 503, whatever the error (NotFound included).
        assert!(matches!(CoreError::from(StoreError::NotFound), CoreError::Storage(_)));
    }

    #[test]
    fn domain_errors_convert_as_the_routes_answer_them() {
        let inconsistent =
            CoreError::from(HistoryError::InconsistentIdentity(AllocationId::from_random([1; 16])));
        assert_eq!(inconsistent.to_api_error().status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(matches!(CoreError::from(HistoryError::InvalidSample), CoreError::HistoryUnavailable));
        assert!(matches!(CoreError::from(HistoryError::TooLarge), CoreError::HistoryUnavailable));
        assert_eq!(
            CoreError::from(ObservationError::InconsistentIdentity).to_api_error().status,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert!(matches!(CoreError::from(param("name")), CoreError::Validation(_)));
        assert!(matches!(CoreError::from(BodyError::Unreadable), CoreError::Body(BodyError::Unreadable)));
    }

    #[test]
    fn the_response_is_the_core_envelope() {
        let response = CoreError::NotFound("project").into_response();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        // Core never answers in the older `{"error": "message"}` shape.
        assert!(!CoreError::InvalidAdminKey.to_api_error().legacy);
    }
}
