//! The feedback object as the client API shows it (snake_case, Unix seconds).

use agentplane_domain::feedback::{Feedback, Rating};
use serde::{Deserialize, Serialize};
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
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = CreateFeedback)]
#[allow(dead_code)]
pub struct CreateFeedback {
    pub rating: RatingName,
    /// At most 2000 characters.
    #[schema(max_length = 2000)]
    pub comment: Option<String>,
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
