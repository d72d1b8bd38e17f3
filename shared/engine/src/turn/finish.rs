//! A turn's end: the last write, and what the caller is told.

use agentplane_domain::action::Action;
use agentplane_domain::event::EventPayload;
use agentplane_domain::event::payload::TurnFailure;
use agentplane_domain::session::StopReason;
use serde_json::Map;

use crate::ports::{ChatModel, SessionMove, TurnStore};

use super::{Ending, Interrupt, Turn, TurnError, TurnOutcome, Write, budget_event, ended_event};

impl<S: TurnStore, M: ChatModel> Turn<'_, S, M> {
    /// Records the end and releases the session, unless the ending was written with its step.
    pub(super) async fn finish(mut self, ending: Ending) -> Result<TurnOutcome, TurnError> {
        let (stop_reason, detail, error) = match ending {
            Ending::Answered(text) => {
                return Ok(self.outcome(StopReason::EndTurn, Some(text), None, Vec::new()));
            }
            Ending::Paused(actions) => {
                return Ok(self.outcome(StopReason::RequiresAction, None, None, actions));
            }
            Ending::BudgetPaused(hit) => {
                let mut outcome = self.outcome(StopReason::BudgetReached, None, None, Vec::new());
                outcome.budget = Some(hit);
                return Ok(outcome);
            }
            Ending::HandedOver => {
                let version = self.transcript_version;
                let mut outcome = self.outcome(StopReason::Limit, None, None, Vec::new());
                outcome.handed_over = Some(version);
                return Ok(outcome);
            }
            Ending::SessionGone => {
                tracing::info!(session = %self.plan.session_id, "the session was deleted during its turn; the turn stopped");
                return Err(TurnError::SessionNotFound);
            }
            Ending::LeaseLost => {
                tracing::warn!(session = %self.plan.session_id, "a turn lost its hold on the session; the turn stopped");
                // The call it made is paid for, on the session as long as it lives.
                if let Some((_, usage, cost)) = self.unrecorded.take()
                    && let Err(err) = self
                        .engine
                        .store
                        .add_usage(&self.plan.project_id, &self.plan.session_id, usage, cost)
                        .await
                {
                    tracing::warn!(error = %err, "could not record the spend of a turn that lost its hold");
                }
                let error = (
                    "turn_lease_lost".to_owned(),
                    "another turn took the session over; this turn stopped".to_owned(),
                );
                return Ok(self.outcome(StopReason::Error, None, Some(error), Vec::new()));
            }
            Ending::BudgetStopped(hit) => {
                self.budget_hit = Some(hit);
                (StopReason::BudgetReached, None, None)
            }
            Ending::Limit(which) => (StopReason::Limit, Some(which), None),
            Ending::Cancelled => (StopReason::Cancelled, None, None),
            Ending::Failed(code, message) => (StopReason::Error, None, Some((code, message))),
        };
        let mut events = Vec::new();
        let mut usage = None;
        if let Some((recorded, spent, cost)) = self.unrecorded.take() {
            events.push(EventPayload::Usage(recorded));
            usage = Some((spent, cost));
        }
        if let Some(hit) = self.budget_hit {
            events.push(budget_event(hit));
        }
        if let Some((code, message)) = &error {
            events.push(EventPayload::Error(TurnFailure {
                code: code.clone(),
                message: message.clone(),
                extra: Map::new(),
            }));
        }
        events.push(ended_event(stop_reason, detail, self.usage, self.unpriced, self.cost_usd));
        let write = Write {
            usage,
            session_move: SessionMove::End(stop_reason),
            despite_cancel: true,
            ..Write::default()
        };
        match self.commit(&events, write).await {
            Ok(()) => {}
            Err(Interrupt::SessionGone) => return Err(TurnError::SessionNotFound),
            Err(Interrupt::LeaseLost | Interrupt::Cancelled) => {
                tracing::warn!("a turn could not record its end: another turn holds the session");
            }
            Err(Interrupt::Storage(err)) => {
                tracing::error!(error = %err, "could not record the end of a turn")
            }
        }
        let hit = self.budget_hit;
        let mut outcome = self.outcome(stop_reason, None, error, Vec::new());
        outcome.budget = hit;
        Ok(outcome)
    }

    pub(super) fn outcome(
        self,
        stop_reason: StopReason,
        output_text: Option<String>,
        error: Option<(String, String)>,
        actions: Vec<Action>,
    ) -> TurnOutcome {
        TurnOutcome {
            turn_id: self.turn_id,
            stop_reason,
            output_text,
            usage: self.usage,
            cost_usd: self.cost_usd,
            unpriced: self.unpriced,
            error,
            actions,
            budget: None,
            handed_over: None,
        }
    }
}
