//! How the engine's errors become the client API's: each use case's error mapped, once, into
//! `ClientError`.

use agentplane_engine::TurnError;
use agentplane_engine::admission::Refused;
use agentplane_store::StoreError;

use super::ClientError;

/// A use case's port error is a storage error here.
impl From<agentplane_engine::ports::PortError> for ClientError {
    fn from(err: agentplane_engine::ports::PortError) -> Self {
        agentplane_store::StoreError::from(err).into()
    }
}

/// Authoring an agent: a refused URL is reported as the webhook routes report it.
impl From<agentplane_engine::agents::AuthoringError> for ClientError {
    fn from(err: agentplane_engine::agents::AuthoringError) -> Self {
        use agentplane_engine::agents::AuthoringError;
        match err {
            AuthoringError::Invalid(err) => Self::Validation(err),
            AuthoringError::Unreachable(err) => Self::Webhook(err.into()),
            AuthoringError::NotFound => Self::AgentNotFound,
            AuthoringError::ConcurrentUpdate => Self::ConcurrentUpdate,
            AuthoringError::Port(err) => err.into(),
        }
    }
}

/// A session's create, change, delete or cancel.
impl From<agentplane_engine::sessions::SessionsError> for ClientError {
    fn from(err: agentplane_engine::sessions::SessionsError) -> Self {
        use agentplane_engine::sessions::SessionsError;
        match err {
            SessionsError::NotFound => Self::SessionNotFound,
            SessionsError::AgentNotFound => Self::AgentNotFound,
            SessionsError::NothingToCancel { runtime_status } => Self::NothingToCancel { runtime_status },
            SessionsError::Turn(err) => err.into(),
            SessionsError::Randomness => Self::internal("randomness"),
            SessionsError::Port(err) => err.into(),
        }
    }
}

/// A session file's create or delete.
impl From<agentplane_engine::files::FilesError> for ClientError {
    fn from(err: agentplane_engine::files::FilesError) -> Self {
        use agentplane_engine::files::FilesError;
        match err {
            FilesError::SessionNotFound => Self::SessionNotFound,
            FilesError::FileNotFound => Self::FileNotFound,
            FilesError::AgentNotFound => Self::AgentNotFound,
            FilesError::AgentNotPublished => Self::AgentNotPublished,
            FilesError::AttachmentsNotEnabled(message) => Self::AttachmentsNotEnabled(message),
            FilesError::Invalid(err) => Self::Validation(err),
            FilesError::BucketNotRegistered(name) => Self::BucketNotRegistered(name),
            FilesError::FileLimitReached { max_files } => Self::FileLimitReached { max_files },
            FilesError::StoredBytesQuota { max, stored, size } => {
                Self::StoredBytesQuota { max, stored, size }
            }
            FilesError::Randomness => Self::internal("randomness"),
            FilesError::Port(err) => err.into(),
        }
    }
}

/// Answering an action.
impl From<agentplane_engine::actions::ActionsError> for ClientError {
    fn from(err: agentplane_engine::actions::ActionsError) -> Self {
        use agentplane_engine::actions::ActionsError;
        match err {
            ActionsError::SessionNotFound => Self::SessionNotFound,
            ActionsError::ActionNotFound => Self::ActionNotFound,
            ActionsError::NotPermitted => Self::AnswerNotPermitted,
            ActionsError::NotPending { action_status } => Self::ActionNotPending { action_status },
            ActionsError::Invalid(err) => Self::Validation(err),
            ActionsError::Port(err) => err.into(),
        }
    }
}

/// Queueing or cancelling a background run: a refused callback is reported as the webhook
/// routes report it.
impl From<agentplane_engine::runs::RunsError> for ClientError {
    fn from(err: agentplane_engine::runs::RunsError) -> Self {
        use agentplane_engine::runs::RunsError;
        match err {
            RunsError::BackgroundNotEnabled => Self::BackgroundNotEnabled,
            RunsError::Callback(err) => Self::Webhook(err.into()),
            RunsError::RunNotFound => Self::RunNotFound,
            RunsError::NotActive { run_status } => Self::RunNotActive { run_status },
            RunsError::Turn(err) => err.into(),
            RunsError::KeptChanging => Self::Storage(StoreError::unavailable("the run kept changing")),
            RunsError::Internal(what) => Self::internal(what),
            RunsError::Randomness => Self::internal("randomness"),
            RunsError::Port(err) => err.into(),
        }
    }
}

/// Rating a message.
impl From<agentplane_engine::feedback::FeedbackError> for ClientError {
    fn from(err: agentplane_engine::feedback::FeedbackError) -> Self {
        use agentplane_engine::feedback::FeedbackError;
        match err {
            FeedbackError::SessionNotFound => Self::SessionNotFound,
            FeedbackError::MessageNotFound => Self::MessageNotFound,
            FeedbackError::Invalid(err) => Self::Validation(err),
            FeedbackError::ConcurrentUpdate => Self::ConcurrentUpdate,
            FeedbackError::Randomness => Self::internal("randomness"),
            FeedbackError::Port(err) => err.into(),
        }
    }
}

impl From<TurnError> for ClientError {
    fn from(err: TurnError) -> Self {
        match err {
            TurnError::Busy => Self::SessionBusy { session_id: None },
            TurnError::ActionsPending(ids) => {
                Self::ActionsPending { pending_action_ids: ids.iter().map(ToString::to_string).collect() }
            }
            TurnError::BudgetPaused { spent_usd, max_cost_usd } => {
                Self::BudgetPaused { spent_usd, max_cost_usd }
            }
            TurnError::ModelNotPriced { model } => Self::ModelNotPriced { model },
            TurnError::SessionNotFound => Self::SessionNotFound,
            TurnError::Storage(err) => Self::Storage(err.into()),
        }
    }
}

impl From<Refused> for ClientError {
    fn from(err: Refused) -> Self {
        match err {
            Refused::AgentNotFound => Self::AgentNotFound,
            Refused::AgentNotPublished => Self::AgentNotPublished,
            Refused::SessionNotFound => Self::SessionNotFound,
            Refused::SpendLimitReached { spent_usd, max_cost_usd } => {
                Self::SpendLimitReached { spent_usd, max_cost_usd }
            }
            Refused::Storage(err) => Self::Storage(err.into()),
        }
    }
}
