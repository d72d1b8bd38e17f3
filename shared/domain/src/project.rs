//! Projects: the unit of isolation. Every object belongs to exactly one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ProjectId, Timestamp, ValidationError};

pub const MAX_NAME_CHARS: usize = 128;

/// A display name: a string of 1 to 128 characters after trimming.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Name(String);

impl Name {
    pub fn from_json(param: &str, value: Option<&Value>) -> Result<Self, ValidationError> {
        let Some(value) = value else {
            return Err(ValidationError::new(param, format!("`{param}` is required")));
        };
        let Value::String(text) = value else {
            return Err(ValidationError::new(param, format!("`{param}` must be a string")));
        };
        Self::new(param, text)
    }

    pub fn new(param: &str, text: &str) -> Result<Self, ValidationError> {
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.chars().count() > MAX_NAME_CHARS {
            return Err(ValidationError::new(
                param,
                format!("`{param}` must be 1 to {MAX_NAME_CHARS} characters"),
            ));
        }
        Ok(Self(trimmed.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Project {
    pub id: ProjectId,
    pub name: Name,
    pub created_at: Timestamp,
    /// The tenant the project belongs to; `None`: it is its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<crate::ids::TenantId>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_trimmed_and_bounded() {
        assert_eq!(Name::from_json("name", Some(&json!("  a  "))).map(|n| n.0), Ok("a".into()));
        assert!(Name::from_json("name", None).is_err());
        assert!(Name::from_json("name", Some(&json!("   "))).is_err());
        assert!(Name::from_json("name", Some(&json!(5))).is_err());
        assert!(Name::from_json("name", Some(&json!("x".repeat(129)))).is_err());
    }
}
