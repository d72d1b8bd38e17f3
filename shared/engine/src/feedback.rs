//! Rating an assistant message of a session: a message has one feedback, so rating it again
//! replaces the rating and comment of the one there (same id).

use agentplane_domain::ValidationError;
use agentplane_domain::event::EventType;
use agentplane_domain::feedback::{Feedback, FeedbackId, NewFeedback};
use agentplane_domain::page::PageLimit;
use agentplane_domain::{ProjectId, SessionId};

use crate::ports::PortError;
use crate::ports::feedback::MessageFeedback;

/// How many times a rating is written again over a feedback that changed meanwhile.
const ATTEMPTS: usize = 5;

/// Why a message was not rated.
#[derive(Debug, thiserror::Error)]
pub enum FeedbackError {
    /// The project has no such live session.
    #[error("session not found")]
    SessionNotFound,
    /// The session has no such event (or, without an agent, nothing to rate).
    #[error("message not found")]
    MessageNotFound,
    /// The event is not an assistant message, or the rating is invalid (names the parameter).
    #[error(transparent)]
    Invalid(ValidationError),
    /// The message's feedback kept changing meanwhile.
    #[error("the feedback kept changing")]
    ConcurrentUpdate,
    #[error("no randomness for an id")]
    Randomness,
    #[error(transparent)]
    Port(PortError),
}

impl From<PortError> for FeedbackError {
    fn from(err: PortError) -> Self {
        Self::Port(err)
    }
}

/// A message's feedback as written.
#[derive(Debug, Clone)]
pub struct Rated {
    pub feedback: Feedback,
    /// It replaced the message's earlier feedback (else it is the first).
    pub replaced: bool,
}

/// Rates the message `seq` (`None`: a malformed event id, as missing) of the live session
/// `session_id` with `rating` (what the body asked for; its error is answered only once the
/// message is known). A rating that meets another being written is written again over it.
pub async fn rate<S: MessageFeedback>(
    store: &S,
    project: ProjectId,
    session_id: &SessionId,
    seq: Option<u64>,
    rating: Result<NewFeedback, ValidationError>,
) -> Result<Rated, FeedbackError> {
    let session = match store.live_session(&project, session_id).await {
        Ok(session) => session,
        Err(PortError::NotFound) => return Err(FeedbackError::SessionNotFound),
        Err(err) => return Err(err.into()),
    };
    let seq = seq.filter(|n| *n > 0).ok_or(FeedbackError::MessageNotFound)?;
    let page = store.events_after(&session.id, seq - 1, PageLimit::DEFAULT).await?;
    let event = page.items.into_iter().find(|e| e.seq == seq).ok_or(FeedbackError::MessageNotFound)?;
    if event.kind != EventType::AssistantMessage {
        return Err(FeedbackError::Invalid(ValidationError::new(
            "event_id",
            format!("event {seq} is a `{}`, not an assistant message", event.kind.as_str()),
        )));
    }
    let agent_id = session.agent_id.ok_or(FeedbackError::MessageNotFound)?;
    let NewFeedback { rating, comment } = rating.map_err(FeedbackError::Invalid)?;
    for _ in 0..ATTEMPTS {
        let now = crate::now();
        let previous = store.feedback_on(&project, &session.id, seq).await?;
        let feedback = match &previous {
            Some(old) => Feedback { rating, comment: comment.clone(), updated_at: now, ..old.clone() },
            None => Feedback {
                id: FeedbackId::from_random(crate::random::secret().map_err(|_| FeedbackError::Randomness)?),
                project_id: project,
                agent_id,
                session_id: session.id,
                event_id: seq,
                rating,
                comment: comment.clone(),
                created_at: now,
                updated_at: now,
            },
        };
        match store.put_feedback(&feedback, previous.is_some()).await {
            Ok(()) => return Ok(Rated { feedback, replaced: previous.is_some() }),
            Err(PortError::Conflict) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(FeedbackError::ConcurrentUpdate)
}
