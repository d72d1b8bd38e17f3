//! The feedback object as the client API shows it (snake_case, Unix seconds).

use agentplane_domain::ValidationError;
use agentplane_domain::feedback::{Feedback, NewFeedback, Rating};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = FeedbackRating)]
pub enum RatingName {
    Up,
    Down,
}

impl From<Rating> for RatingName {
    fn from(rating: Rating) -> Self {
        match rating {
            Rating::Up => Self::Up,
            Rating::Down => Self::Down,
        }
    }
}

/// Rate an assistant message.
// Read as given (`null` reads as absent) and checked once the message is found, as
// `NewFeedback`: a field of the wrong type, or one this body does not take, answers 400 naming it.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = CreateFeedback)]
pub struct CreateFeedback {
    #[schema(value_type = RatingName, required = true)]
    pub rating: Option<Value>,
    /// At most 2000 characters.
    #[schema(value_type = Option<String>, max_length = 2000)]
    pub comment: Option<Value>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub other: Map<String, Value>,
}

impl TryFrom<CreateFeedback> for NewFeedback {
    type Error = ValidationError;

    fn try_from(body: CreateFeedback) -> Result<Self, ValidationError> {
        crate::body::no_other_field(&body.other)?;
        NewFeedback::new(body.rating.as_ref(), body.comment.as_ref())
    }
}

/// Feedback on one assistant message.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Feedback)]
pub struct FeedbackBody {
    /// `fb_` and 24 hex characters.
    #[schema(pattern = "^fb_[0-9a-f]{24}$")]
    pub id: String,
    /// Always `feedback`.
    #[schema(pattern = "^feedback$")]
    pub object: &'static str,
    pub agent_id: String,
    pub session_id: String,
    /// The assistant message's event id (its sequence number in the session's log).
    pub event_id: u64,
    pub rating: RatingName,
    pub comment: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds: when the rating was last given.
    pub updated_at: i64,
}

impl From<&Feedback> for FeedbackBody {
    fn from(f: &Feedback) -> Self {
        Self {
            id: f.id.to_string(),
            object: "feedback",
            agent_id: f.agent_id.to_string(),
            session_id: f.session_id.to_string(),
            event_id: f.event_id,
            rating: f.rating.into(),
            comment: f.comment.clone(),
            created_at: f.created_at.unix_seconds(),
            updated_at: f.updated_at.unix_seconds(),
        }
    }
}

/// Filters of an agent's feedback list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct FeedbackParams {
    /// Only feedback of this rating.
    pub rating: Option<RatingName>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A body as the route reads it: the `Wire` extractor, then the conversion.
    fn read(body: Value) -> Result<NewFeedback, (Option<String>, String)> {
        let Value::Object(map) = body else { panic!("an object") };
        let body: CreateFeedback = crate::body::from_object(map).expect("reading never fails");
        NewFeedback::try_from(body).map_err(|e| (e.param, e.message))
    }

    #[test]
    fn a_feedback_body_is_refused_by_field_as_the_map_was() {
        assert_eq!(
            read(json!({"rating": "down", "comment": null})),
            Ok(NewFeedback { rating: Rating::Down, comment: None })
        );
        let refused = |param: &str, message: &str| Err((Some(param.to_owned()), message.to_owned()));
        assert_eq!(read(json!({})), refused("rating", "`rating` is required"));
        assert_eq!(read(json!({"rating": null})), refused("rating", "`rating` is required"));
        assert_eq!(read(json!({"rating": 1})), refused("rating", "`rating` must be `up` or `down`"));
        assert_eq!(read(json!({"rating": "meh"})), refused("rating", "`rating` must be `up` or `down`"));
        let long = "`comment` must be a string of at most 2000 characters";
        assert_eq!(read(json!({"rating": "up", "comment": ["x"]})), refused("comment", long));
        // An unknown field is named before anything else is checked; the first by name.
        assert_eq!(read(json!({"stars": 5, "rating": 1, "pts": 1})), refused("pts", "unknown field `pts`"));
    }
}
