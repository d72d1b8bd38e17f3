//! Carrying a paused turn on: once no action of the turn is pending, a [`Continuation`] goes on
//! the `runs` queue, and the `run-execution` job claims it and runs the rest of the turn.

use agentplane_domain::action::{Action, Continuation};

use crate::TurnEngine;
use crate::ports::queues::RunsMessage;
use crate::ports::sessions::Continuations;
use crate::ports::{ChatModel, PortError, TurnStore};

/// Enqueues the continuation of `action`'s turn when no action of that turn is pending any more;
/// `true` when it did. Two settlers may both enqueue: the continuation is claimed once. Until
/// this returns, the action waits in the store's index of settled actions, so a send that
/// failed is made again by the retention sweep.
pub async fn carry_on_if_settled<S: Continuations>(store: &S, action: &Action) -> Result<bool, PortError> {
    let pending = store.pending_actions_of(&action.project_id, &action.session_id).await?;
    if pending.iter().any(|a| a.turn_id == action.turn_id) {
        // The last of them carries the turn on.
        store.mark_carried_on(action).await?;
        return Ok(false);
    }
    let continuation = Continuation {
        project_id: action.project_id,
        session_id: action.session_id,
        turn_id: action.turn_id.clone(),
        version: action.pause_version,
    };
    store.send_run(&RunsMessage::Continuation(continuation), 0).await?;
    store.mark_carried_on(action).await?;
    Ok(true)
}

/// Carries a turn paused by its budget on when the budget now allows a model call: the
/// session's own budget (or, without one, `agent_budget`) above its spend, or no budget at all.
/// `true` when it sent the continuation; lowering the budget or leaving it reached does nothing.
pub async fn carry_on_after_budget<S: Continuations>(
    store: &S,
    session: &agentplane_domain::session::Session,
    agent_budget: Option<agentplane_domain::session::SessionBudget>,
) -> Result<bool, PortError> {
    let (Some(turn_id), Some(version)) = (&session.current_turn_id, session.pause_version) else {
        return Ok(false);
    };
    let budget = session.budget.or(agent_budget);
    if budget.is_some_and(|b| b.reached(session.cost_usd)) {
        return Ok(false);
    }
    let continuation = Continuation {
        project_id: session.project_id,
        session_id: session.id,
        turn_id: turn_id.clone(),
        version,
    };
    store.send_run(&RunsMessage::Continuation(continuation), 0).await?;
    Ok(true)
}

/// What a delivered continuation came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Continued {
    /// This delivery claimed the paused turn and ran it on to its next end or pause.
    Ran(Box<crate::TurnOutcome>),
    /// Nothing to do: another delivery claimed it already, the turn was cancelled, or the
    /// session is gone. The message is done with.
    Stale,
    /// The turn is a background run's: what its run came to.
    Run(crate::background::Executed),
}

impl<S: TurnStore, M: ChatModel> TurnEngine<S, M> {
    /// Claims the paused turn `continuation` names (a conditional write on its saved state's
    /// version) and runs it on. A storage failure is an `Err`: the message is retried.
    pub async fn continue_turn(&self, continuation: &Continuation) -> Result<Continued, PortError> {
        self.continue_turn_until(continuation, None).await
    }

    /// [`Self::continue_turn`], handing the turn over again at `handover_at` (a background run
    /// whose invocation ends then).
    pub async fn continue_turn_until(
        &self,
        continuation: &Continuation,
        handover_at: Option<tokio::time::Instant>,
    ) -> Result<Continued, PortError> {
        match self.continue_paused(continuation, handover_at).await {
            Ok(Some(outcome)) => Ok(Continued::Ran(Box::new(outcome))),
            Ok(None) | Err(crate::TurnError::SessionNotFound) => Ok(Continued::Stale),
            Err(
                crate::TurnError::Busy
                | crate::TurnError::ActionsPending(_)
                | crate::TurnError::BudgetPaused { .. }
                | crate::TurnError::ModelNotPriced { .. },
            ) => Ok(Continued::Stale),
            Err(crate::TurnError::Storage(err)) => Err(err),
        }
    }
}
