//! What answering a paused turn's actions reads and writes: the action, its one state move,
//! and (to carry the turn on) its session's pending actions and the `runs` queue.

use std::future::Future;

use agentplane_domain::action::{Action, ActionId, ActionStatus, Answer};
use agentplane_domain::{ProjectId, SessionId, Timestamp};

use super::PortError;
use super::sessions::{Continuations, LiveSessions};

/// A session's actions as a client answers them. The session is [`LiveSessions`]', carrying
/// the turn on is [`Continuations`]'.
pub trait ActionAnswers: LiveSessions + Continuations + Send + Sync {
    /// The action `id` of the session; `NotFound` when there is none.
    fn action(
        &self,
        project: &ProjectId,
        session: &SessionId,
        id: &ActionId,
    ) -> impl Future<Output = Result<Action, PortError>> + Send;

    /// Moves the pending `action` to `status` (with `answer`, at `now`), only while it is still
    /// pending; the action as written. `Conflict` when it is not pending any more, `NotFound`
    /// when it does not exist.
    fn settle_action(
        &self,
        action: &Action,
        status: ActionStatus,
        answer: Option<Answer>,
        now: Timestamp,
    ) -> impl Future<Output = Result<Action, PortError>> + Send;
}
