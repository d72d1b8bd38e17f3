//! What rating a message reads and writes: the session's events (the message rated) and the
//! message's one feedback.

use std::future::Future;

use agentplane_domain::event::Event;
use agentplane_domain::feedback::Feedback;
use agentplane_domain::page::{Page, PageLimit};
use agentplane_domain::{ProjectId, SessionId};

use super::PortError;
use super::sessions::LiveSessions;

/// A message's feedback. The session it is in is [`LiveSessions`]'.
pub trait MessageFeedback: LiveSessions + Send + Sync {
    /// Up to `limit` events of the session's log after `after` (exclusive), oldest first.
    fn events_after(
        &self,
        session: &SessionId,
        after: u64,
        limit: PageLimit,
    ) -> impl Future<Output = Result<Page<Event>, PortError>> + Send;

    /// The feedback on the message `event` of the session; `None` when it has none.
    fn feedback_on(
        &self,
        project: &ProjectId,
        session: &SessionId,
        event: u64,
    ) -> impl Future<Output = Result<Option<Feedback>, PortError>> + Send;

    /// Writes `feedback`: a first one (unless `replaces`) only while the message has none, a
    /// later rating of the same feedback only while it is there (the last writer's rating
    /// stands); `Conflict` when a first one finds one there, or a replacement finds none.
    fn put_feedback(
        &self,
        feedback: &Feedback,
        replaces: bool,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}
