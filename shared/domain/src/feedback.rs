//! Feedback on an assistant message: thumbs up or down with an optional comment, one per
//! message (a second replaces the first), listed per agent.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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

/// What a feedback body gives: `{rating, comment?}`; unknown fields are refused.
pub fn from_body(body: &Map<String, Value>) -> Result<(Rating, Option<String>), ValidationError> {
    if let Some(unknown) = body.keys().find(|k| !["rating", "comment"].contains(&k.as_str())) {
        return Err(ValidationError::new(unknown.clone(), format!("unknown field `{unknown}`")));
    }
    let rating = match body.get("rating") {
        Some(Value::String(text)) => Rating::parse("rating", text)?,
        None | Some(Value::Null) => return Err(ValidationError::new("rating", "`rating` is required")),
        Some(_) => return Err(ValidationError::new("rating", "`rating` must be `up` or `down`")),
    };
    let comment = match body.get("comment") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) if text.chars().count() <= MAX_COMMENT_CHARS => Some(text.clone()),
        Some(_) => {
            return Err(ValidationError::new(
                "comment",
                format!("`comment` must be a string of at most {MAX_COMMENT_CHARS} characters"),
            ));
        }
    };
    Ok((rating, comment))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn a_body_is_a_rating_and_an_optional_comment() {
        assert_eq!(from_body(&body(json!({"rating": "up"}))), Ok((Rating::Up, None)));
        assert_eq!(
            from_body(&body(json!({"rating": "down", "comment": "wrong"}))),
            Ok((Rating::Down, Some("wrong".into())))
        );
        for (bad, param) in [
            (json!({}), "rating"),
            (json!({"rating": "meh"}), "rating"),
            (json!({"rating": 1}), "rating"),
            (json!({"rating": "up", "comment": 5}), "comment"),
            (json!({"rating": "up", "comment": "x".repeat(2001)}), "comment"),
            (json!({"rating": "up", "stars": 5}), "stars"),
        ] {
            assert_eq!(
                from_body(&body(bad.clone())).err().and_then(|e| e.param),
                Some(param.into()),
                "{bad}"
            );
        }
    }
}
