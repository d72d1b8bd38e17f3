//! What a port call can end in.

/// A port's error: `NotFound` when the thing is gone, `Conflict` when a write's condition did
/// not hold; the other two are the backend's trouble (a 503 or a 500 at the surfaces).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    #[error("not found")]
    NotFound,
    #[error("the write's condition did not hold")]
    Conflict,
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    #[error("stored item is corrupt: {0}")]
    Corrupt(String),
}

impl PortError {
    pub fn unavailable(err: impl std::fmt::Display) -> Self {
        Self::Unavailable(err.to_string())
    }
}
