use thiserror::Error;

/// What a storage call can end in. Backend detail is kept for logs only; surfaces never show it.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("the write's condition did not hold")]
    Conflict,
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    #[error("stored item is corrupt: {0}")]
    Corrupt(String),
}

impl StoreError {
    pub fn unavailable(err: impl std::fmt::Display) -> Self {
        Self::Unavailable(err.to_string())
    }
}

impl From<serde_dynamo::Error> for StoreError {
    fn from(err: serde_dynamo::Error) -> Self {
        Self::Corrupt(err.to_string())
    }
}

/// The engine's ports answer their own error; a storage call's error is one, variant for variant.
impl From<StoreError> for agentplane_engine::ports::PortError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound => Self::NotFound,
            StoreError::Conflict => Self::Conflict,
            StoreError::Unavailable(detail) => Self::Unavailable(detail),
            StoreError::Corrupt(detail) => Self::Corrupt(detail),
        }
    }
}

/// A use case's error where a surface handles storage errors (the same four cases).
impl From<agentplane_engine::ports::PortError> for StoreError {
    fn from(err: agentplane_engine::ports::PortError) -> Self {
        use agentplane_engine::ports::PortError;
        match err {
            PortError::NotFound => Self::NotFound,
            PortError::Conflict => Self::Conflict,
            PortError::Unavailable(detail) => Self::Unavailable(detail),
            PortError::Corrupt(detail) => Self::Corrupt(detail),
        }
    }
}
