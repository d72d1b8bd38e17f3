//! Answering the actions a paused turn waits for: whoever holds a key of the project may answer
//! (only the keys the agent names, when it names any), once, while the action is pending and
//! before it expires. An answer past the expiry records the action expired, as the retention
//! sweep would, and is refused. Once no action of the turn is pending, the turn carries on:
//! through the `runs` queue for the actions route, in the call itself for an A2A message.

use agentplane_domain::action::{Action, ActionId, ActionStatus, Answer, AnswerFields, Continuation};
use agentplane_domain::{ApiKeyId, ProjectId, SessionId, Timestamp, ValidationError};

use crate::TurnEngine;
use crate::continuation::{Continued, carry_on_if_settled};
use crate::ports::actions::ActionAnswers;
use crate::ports::{ChatModel, PortError, TurnStore};

/// Why an action was not answered.
#[derive(Debug, thiserror::Error)]
pub enum ActionsError {
    /// The project has no such live session.
    #[error("session not found")]
    SessionNotFound,
    /// The session has no such action.
    #[error("action not found")]
    ActionNotFound,
    /// The agent names the keys that may answer, and not this one.
    #[error("this key may not answer the action")]
    NotPermitted,
    /// The action was answered, expired or cancelled (its status now).
    #[error("the action is not pending")]
    NotPending { action_status: ActionStatus },
    /// The body is not an answer to an action of this type (names the parameter).
    #[error(transparent)]
    Invalid(ValidationError),
    #[error(transparent)]
    Port(PortError),
}

impl From<PortError> for ActionsError {
    fn from(err: PortError) -> Self {
        Self::Port(err)
    }
}

fn or_missing<T>(result: Result<T, PortError>, missing: ActionsError) -> Result<T, ActionsError> {
    match result {
        Ok(value) => Ok(value),
        Err(PortError::NotFound) => Err(missing),
        Err(err) => Err(ActionsError::Port(err)),
    }
}

/// Answers the action `id` (`None`: a malformed id, as missing) of the live session
/// `session_id` as the key `key`, with `fields` read for the action's type; the action as
/// resolved. When no action of its turn is pending any more, the turn's continuation is sent
/// (one that cannot be sent is only logged: the retention sweep sends it).
pub async fn answer<S: ActionAnswers>(
    store: &S,
    project: ProjectId,
    session_id: &SessionId,
    id: Option<ActionId>,
    key: &ApiKeyId,
    fields: AnswerFields,
) -> Result<Action, ActionsError> {
    or_missing(store.live_session(&project, session_id).await, ActionsError::SessionNotFound)?;
    let id = id.ok_or(ActionsError::ActionNotFound)?;
    let action = or_missing(store.action(&project, session_id, &id).await, ActionsError::ActionNotFound)?;
    if !action.may_answer(key) {
        return Err(ActionsError::NotPermitted);
    }
    if action.status != ActionStatus::Pending {
        return Err(ActionsError::NotPending { action_status: action.status });
    }
    let answer = Answer::from_fields(action.kind, fields).map_err(ActionsError::Invalid)?;
    let now = crate::now();
    let (settled, overdue) = settle(store, &action, answer, now).await?;
    // The action is settled, so this call has done its part whatever happens next. Should the
    // continuation not be enqueued here, the turn waits, nothing pending, for the retention
    // sweep to re-drive it.
    if let Err(err) = carry_on_if_settled(store, &settled).await {
        tracing::warn!(action = %settled.id, error = %err, "the turn's continuation was not enqueued");
    }
    if overdue {
        return Err(ActionsError::NotPending { action_status: settled.status });
    }
    Ok(settled)
}

/// Settles the answers a message gives the actions the turn `turn_id` of the session waits
/// for, as the key `key` (who may answer is checked for every action before any is settled;
/// the first refusal ends the call), and, once none of the turn's actions is pending, carries
/// the turn on in this call: `Some` is what that came to. The claim of the paused turn is
/// conditional, so a continuation the retention sweep sends meanwhile does nothing more.
pub async fn answer_turn<S, M>(
    engine: &TurnEngine<S, M>,
    project: ProjectId,
    key: &ApiKeyId,
    session: SessionId,
    turn_id: &str,
    answers: Vec<(Action, Answer)>,
) -> Result<Option<Continued>, ActionsError>
where
    S: TurnStore + ActionAnswers,
    M: ChatModel,
{
    let store = &engine.store;
    if answers.iter().any(|(action, _)| !action.may_answer(key)) {
        return Err(ActionsError::NotPermitted);
    }
    let mut settled = Vec::with_capacity(answers.len());
    for (action, answer) in answers {
        let (done, overdue) = settle(store, &action, answer, crate::now()).await?;
        if overdue {
            if let Err(err) = carry_on_if_settled(store, &done).await {
                tracing::warn!(action = %done.id, error = %err, "the turn's continuation was not enqueued");
            }
            return Err(ActionsError::NotPending { action_status: done.status });
        }
        settled.push(done);
    }
    let pending = store.pending_actions_of(&project, &session).await?;
    let Some(first) = settled.first() else { return Ok(None) };
    if pending.iter().any(|a| a.turn_id == turn_id) {
        return Ok(None);
    }
    let continuation = Continuation {
        project_id: project,
        session_id: session,
        turn_id: turn_id.to_owned(),
        version: first.pause_version,
    };
    // Boxed: a turn's future is large, and this one's callers hold it across their own awaits.
    let continued = Box::pin(engine.continue_turn(&continuation)).await?;
    for action in &settled {
        if let Err(err) = store.mark_carried_on(action).await {
            tracing::warn!(action = %action.id, error = %err, "carried-on mark not written");
        }
    }
    Ok(Some(continued))
}

/// Settles the pending `action` with `answer` at `now`, or, past its expiry, records it expired
/// (`true`: it was overdue). `NotPending` with its status when another answer, the expiry or a
/// cancel came first.
async fn settle<S: ActionAnswers>(
    store: &S,
    action: &Action,
    answer: Answer,
    now: Timestamp,
) -> Result<(Action, bool), ActionsError> {
    // Past its expiry, an action is expired whether or not the retention sweep has recorded it
    // yet.
    let overdue = action.expires_at.is_some_and(|at| at <= now);
    let (status, answer) =
        if overdue { (ActionStatus::Expired, None) } else { (ActionStatus::Resolved, Some(answer)) };
    match store.settle_action(action, status, answer, now).await {
        Ok(settled) => Ok((settled, overdue)),
        // Another answer, the expiry or a cancel came first: the action tells which.
        Err(PortError::Conflict) => {
            let current = or_missing(
                store.action(&action.project_id, &action.session_id, &action.id).await,
                ActionsError::ActionNotFound,
            )?;
            Err(ActionsError::NotPending { action_status: current.status })
        }
        Err(PortError::NotFound) => Err(ActionsError::ActionNotFound),
        Err(err) => Err(ActionsError::Port(err)),
    }
}
