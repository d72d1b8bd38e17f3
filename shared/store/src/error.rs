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
