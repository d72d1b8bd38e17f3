use thiserror::Error;

/// A value from outside that breaks a rule. `param` names the offending field or parameter as
/// the client sent it, so every surface can point at it in its own envelope.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct ValidationError {
    pub param: Option<String>,
    pub message: String,
}

impl ValidationError {
    pub fn new(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self { param: Some(param.into()), message: message.into() }
    }

    pub fn body(message: impl Into<String>) -> Self {
        Self { param: None, message: message.into() }
    }
}
