//! Feedback on an assistant message: thumbs up or down with an optional comment, one per
//! message (a second replaces the first), listed per agent.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{AgentId, InvalidId};
use crate::{ProjectId, SessionId, Timestamp, ValidationError};

crate::webhook::hex_id!(
    /// Feedback: `fb_` and 24 lowercase hex characters.
    FeedbackId,
    "fb_",
    "feedback"
);

pub const MAX_COMMENT_CHARS: usize = 2000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rating {
    Up,
    Down,
}

impl Rating {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
        }
    }

    /// `up` or `down`, as a query parameter or body field named `param`.
    pub fn parse(param: &str, text: &str) -> Result<Self, ValidationError> {
        match text {
            "up" => Ok(Self::Up),
            "down" => Ok(Self::Down),
            _ => Err(ValidationError::new(param, format!("`{param}` must be `up` or `down`"))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feedback {
    pub id: FeedbackId,
    pub project_id: ProjectId,
    pub agent_id: AgentId,
    pub session_id: SessionId,
    /// The assistant message's event (its sequence number in the session's log).
    pub event_id: u64,
    pub rating: Rating,
    pub comment: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A rating and its optional comment, as a feedback body gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFeedback {
    pub rating: Rating,
    pub comment: Option<String>,
}

impl NewFeedback {
    /// `rating` (required, `up` or `down`) and `comment` (at most 2000 characters) as a body
    /// gave them; `None` is absent or `null`.
    pub fn new(rating: Option<&Value>, comment: Option<&Value>) -> Result<Self, ValidationError> {
        let rating = match rating {
            Some(Value::String(text)) => Rating::parse("rating", text)?,
            None | Some(Value::Null) => return Err(ValidationError::new("rating", "`rating` is required")),
            Some(_) => return Err(ValidationError::new("rating", "`rating` must be `up` or `down`")),
        };
        let comment = match comment {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) if text.chars().count() <= MAX_COMMENT_CHARS => Some(text.clone()),
            Some(_) => {
                return Err(ValidationError::new(
                    "comment",
                    format!("`comment` must be a string of at most {MAX_COMMENT_CHARS} characters"),
                ));
            }
        };
        Ok(Self { rating, comment })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_body_is_a_rating_and_an_optional_comment() {
        let new = |rating: Value, comment: Value| {
            NewFeedback::new(Some(&rating).filter(|v| !v.is_null()), Some(&comment).filter(|v| !v.is_null()))
        };
        assert_eq!(new(json!("up"), Value::Null), Ok(NewFeedback { rating: Rating::Up, comment: None }));
        assert_eq!(
            new(json!("down"), json!("wrong")),
            Ok(NewFeedback { rating: Rating::Down, comment: Some("wrong".into()) })
        );
        for (rating, comment, param) in [
            (Value::Null, Value::Null, "rating"),
            (json!("meh"), Value::Null, "rating"),
            (json!(1), Value::Null, "rating"),
            (json!("up"), json!(5), "comment"),
            (json!("up"), json!("x".repeat(2001)), "comment"),
        ] {
            let err = new(rating.clone(), comment.clone()).err();
            assert_eq!(err.and_then(|e| e.param), Some(param.into()), "{rating} {comment}");
        }
    }
}
