//! What can go wrong on a workspace: the Platform API maps each to its status and code.

use agentplane_domain::platform::path::PathError;
use agentplane_domain::platform::path::refusal::TooLarge;

use crate::dispatch::DispatchError;
use crate::ports::PortError;

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The workspace's sandbox cannot be reached now (no node, a node that does not answer).
    #[error("{0}")]
    RuntimeUnavailable(String),
    /// A path that is not a workspace path (or a symlink, a non-regular file).
    #[error(transparent)]
    InvalidPath(PathError),
    #[error("file not found")]
    FileNotFound,
    /// The workspace is past one of the node's caps.
    #[error("{}", .0.describe())]
    TooLarge(TooLarge),
    #[error(transparent)]
    Storage(PortError),
    /// Anything else; the detail is for the log only.
    #[error("internal error: {0}")]
    Internal(String),
}

impl WorkspaceError {
    pub fn internal(what: impl Into<String>) -> Self {
        Self::Internal(what.into())
    }
}

impl From<PortError> for WorkspaceError {
    fn from(err: PortError) -> Self {
        Self::Storage(err)
    }
}

impl From<DispatchError> for WorkspaceError {
    fn from(err: DispatchError) -> Self {
        match err {
            DispatchError::NodeTimeout => Self::RuntimeUnavailable(err.to_string()),
            DispatchError::Storage(err) => Self::Storage(err),
        }
    }
}
