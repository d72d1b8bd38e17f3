//! Titles for untitled sessions: after a session's first turn answers, one cheap model call
//! names it (its usage counted on the session, the tenant's spend and the log), written only while the session still has no
//! title, so a title set meanwhile (PATCH) is never overwritten.

use agentplane_domain::session::{Session, Title};
use tokio::time::{Duration, Instant};

use crate::TurnEngine;
use crate::model::ChatMessage;
use crate::ports::ChatModel;
use crate::ports::sessions::SessionCalls;

/// How long the title call may take; the answer waits for it.
const TITLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of the first exchange the title model reads.
const EXCERPT_CHARS: usize = 2000;

const INSTRUCTIONS: &str = "Write a title of at most six words for the conversation below. \
     Answer with the title alone: no quotes, no final period.";

fn excerpt(text: &str) -> String {
    text.chars().take(EXCERPT_CHARS).collect()
}

/// What names a session after its first turn: the title model (`None`: titles are off), and
/// the first exchange.
#[derive(Debug, Clone, Copy)]
pub struct FirstTurn<'a> {
    pub model: Option<&'a str>,
    /// Whether the turn was the session's first (nothing in its log before it).
    pub first: bool,
    pub input: &'a str,
    pub answer: Option<&'a str>,
}

impl<S: SessionCalls, M: ChatModel> TurnEngine<S, M> {
    /// Names `session` after its first turn. Does nothing when titles are off, the session has a
    /// title, or the turn gave no answer; a failed call leaves the session untitled (logged).
    pub async fn title_after(&self, session: &Session, turn: FirstTurn<'_>) {
        let FirstTurn { model, first, input, answer } = turn;
        let (Some(model), true, None, Some(answer)) = (model, first, &session.title, answer) else {
            return;
        };
        let messages = [
            ChatMessage::System { content: INSTRUCTIONS.to_owned() },
            ChatMessage::User {
                content: format!("User: {}\n\nAssistant: {}", excerpt(input), excerpt(answer)).into(),
            },
        ];
        let reply = match self.model.complete(model, &messages, &[], Instant::now() + TITLE_TIMEOUT).await {
            Ok(reply) => reply,
            Err(err) => {
                tracing::warn!(session = %session.id, error = %err, "the session's title was not generated");
                return;
            }
        };
        // The call is paid for whether or not its title is kept: on the session, the tenant's
        // spend and the session's log, like a call of a turn.
        if let Err(err) = crate::side_call::record(self, session, "title", model, reply.usage).await {
            tracing::warn!(session = %session.id, error = %err, "the title call's usage was not recorded");
        }
        let Some(title) = reply.text.as_deref().and_then(Title::generated) else { return };
        match self.store.set_title_if_unset(&session.project_id, &session.id, &title, crate::now()).await {
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(session = %session.id, error = %err, "the session's title was not written")
            }
        }
    }
}
