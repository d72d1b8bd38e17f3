//! Titles for untitled sessions: after a session's first turn answers, one cheap model call
//! names it (its usage counted on the session, the tenant's spend and the log), written only while the session still has no
//! title, so a title set meanwhile (PATCH) is never overwritten.

use agentplane_domain::session::{Session, Title};
use agentplane_engine::model::ChatMessage;
use tokio::time::{Duration, Instant};

use crate::{App, edge};

/// How long the title call may take; the answer waits for it.
const TITLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of the first exchange the title model reads.
const EXCERPT_CHARS: usize = 2000;

const INSTRUCTIONS: &str = "Write a title of at most six words for the conversation below. \
     Answer with the title alone: no quotes, no final period.";

fn excerpt(text: &str) -> String {
    text.chars().take(EXCERPT_CHARS).collect()
}

/// Names `session` after its first turn (`first`), which answered `answer` to `input`. Does
/// nothing when titles are off, the session has a title, or the turn gave no answer; a failed
/// call leaves the session untitled (logged).
pub async fn after_first_turn(app: &App, session: &Session, first: bool, input: &str, answer: Option<&str>) {
    let (Some(model), true, None, Some(answer)) = (&app.title_model, first, &session.title, answer) else {
        return;
    };
    let messages = [
        ChatMessage::System { content: INSTRUCTIONS.to_owned() },
        ChatMessage::User {
            content: format!("User: {}\n\nAssistant: {}", excerpt(input), excerpt(answer)).into(),
        },
    ];
    let reply = match app.engine().model.complete(model, &messages, &[], Instant::now() + TITLE_TIMEOUT).await
    {
        Ok(reply) => reply,
        Err(err) => {
            tracing::warn!(session = %session.id, error = %err, "the session's title was not generated");
            return;
        }
    };
    // The call is paid for whether or not its title is kept: on the session, the tenant's
    // spend and the session's log, like a call of a turn.
    if let Err(err) =
        agentplane_engine::side_call::record(app.engine(), session, "title", model, reply.usage).await
    {
        tracing::warn!(session = %session.id, error = %err, "the title call's usage was not recorded");
    }
    let Some(title) = reply.text.as_deref().and_then(Title::generated) else { return };
    match app.store.sessions().set_title_if_unset(&session.project_id, &session.id, &title, edge::now()).await
    {
        Ok(_) => {}
        Err(err) => {
            tracing::warn!(session = %session.id, error = %err, "the session's title was not written")
        }
    }
}
