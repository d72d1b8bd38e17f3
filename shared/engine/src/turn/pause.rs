//! Pausing a turn (for people, for its budget, or to hand over) and resuming it.

use agentplane_domain::action::{Action, ActionId, ActionStatus, ActionType, Resolution, question_of};
use agentplane_domain::event::EventPayload;
use agentplane_domain::event::payload::ActionRequired;
use agentplane_domain::pricing::Usage;
use serde_json::json;
use tokio::time::Instant;

use crate::model::WireToolCall;
use crate::ports::{ChatModel, PortError as StoreError, SessionMove, TurnStore};

use super::{
    BudgetHit, Ending, HOLD_GRACE_MS, Interrupt, PausedCall, PausedTurn, TenantSpend, Turn, Write,
    arguments_of, budget_event, millis,
};

impl<S: TurnStore, M: ChatModel> Turn<'_, S, M> {
    /// Pauses the turn for the step's calls that need a person: one write of the calls, the
    /// actions, their `action.required` events, the transcript with the saved state, and
    /// `requires_action` on the session.
    pub(super) async fn pause(
        &mut self,
        step: u32,
        mut events: Vec<EventPayload>,
        waits: Vec<(WireToolCall, Option<ActionType>)>,
        spent: (Usage, Option<f64>),
    ) -> Result<Ending, Interrupt> {
        let now = self.engine.now();
        let timeout = self.plan.config.human_in_the_loop.approval_timeout_minutes;
        let mut actions = Vec::new();
        let mut calls = Vec::new();
        for (call, kind) in waits {
            let action_id = kind.map(|kind| {
                let args = arguments_of(&call);
                let action = Action {
                    id: ActionId::from_random(crate::random::unique::<12>()),
                    project_id: self.plan.project_id,
                    session_id: self.plan.session_id,
                    turn_id: self.turn_id.clone(),
                    pause_version: self.transcript_version + 1,
                    call_id: call.id.clone(),
                    kind,
                    status: ActionStatus::Pending,
                    tool: call.function.name.clone(),
                    question: (kind == ActionType::Question).then(|| question_of(&args)),
                    args,
                    answer: None,
                    created_at: now,
                    expires_at: agentplane_domain::action::expires_at(now, timeout),
                    settled_at: None,
                    answer_key_ids: self.plan.config.human_in_the_loop.answer_key_ids.clone(),
                };
                let id = action.id.clone();
                actions.push(action);
                id
            });
            calls.push(PausedCall { call, action_id });
        }
        events.extend(actions.iter().map(|a| EventPayload::ActionRequired(ActionRequired::of(a))));
        let state = self.saved_state(step, calls, false)?;
        let write = Write {
            usage: Some(spent),
            save: true,
            paused: Some(&state),
            session_move: SessionMove::Pause { budget: false },
            actions: &actions,
            despite_cancel: false,
        };
        if let Err(interrupt) = self.commit(&events, write).await {
            self.messages.pop();
            return Err(interrupt);
        }
        self.unrecorded = None;
        Ok(Ending::Paused(actions))
    }

    /// The turn's saved state as a pause writes it (JSON): where it stopped and what it spent.
    pub(super) fn saved_state(
        &self,
        step: u32,
        calls: Vec<PausedCall>,
        for_budget: bool,
    ) -> Result<String, Interrupt> {
        let state = PausedTurn {
            agent_id: self.plan.agent_id,
            channel: self.plan.channel,
            version: self.plan.version,
            config: self.plan.config.clone(),
            step,
            calls,
            usage: self.usage,
            cost_usd: self.cost_usd,
            unpriced: self.unpriced,
            budget_ms: u64::try_from(self.plan.budget.as_millis()).unwrap_or(u64::MAX),
            for_budget,
            spend_budget: self.plan.spend_budget,
            for_handover: false,
            tenant: self.plan.tenant.clone(),
        };
        serde_json::to_string(&state).map_err(|e| Interrupt::Storage(StoreError::Corrupt(e.to_string())))
    }

    /// Pauses the turn before the model call of `step`: the budget is reached. One write of the
    /// `budget.reached` event, the transcript with the saved state, and `budget_paused`.
    pub(super) async fn pause_for_budget(&mut self, step: u32, hit: BudgetHit) -> Result<Ending, Interrupt> {
        let state = self.saved_state(step, Vec::new(), true)?;
        let events = [budget_event(hit)];
        let write = Write {
            save: true,
            paused: Some(&state),
            session_move: SessionMove::Pause { budget: true },
            ..Write::default()
        };
        self.commit(&events, write).await?;
        Ok(Ending::BudgetPaused(hit))
    }

    /// The tenant's monthly limit, when its projects' spend reached it (one read, only for a
    /// project of a tenant with a limit).
    pub(super) async fn tenant_limit_hit(&self) -> Result<Option<(String, BudgetHit)>, Interrupt> {
        let Some(TenantSpend { key, monthly_limit_usd: Some(max), .. }) = &self.plan.tenant else {
            return Ok(None);
        };
        let month = agentplane_domain::tenant::month_of(self.engine.now());
        let spent = self.engine.store.tenant_spent(key, &month).await?;
        Ok((spent >= *max)
            .then(|| (key.clone(), BudgetHit { paused: true, spent_usd: spent, max_cost_usd: *max })))
    }

    /// Hands the turn over before the model call of `step`: one write of the transcript with the
    /// saved state (what is left of the turn's time); the session stays `running`, held for the
    /// continuation to claim.
    pub(super) async fn hand_over(&mut self, step: u32) -> Result<Ending, Interrupt> {
        let left = self.plan.deadline.saturating_duration_since(Instant::now());
        let mut state: PausedTurn = serde_json::from_str(&self.saved_state(step, Vec::new(), false)?)
            .map_err(|e| Interrupt::Storage(StoreError::Corrupt(e.to_string())))?;
        state.for_handover = true;
        state.budget_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
        let state = serde_json::to_string(&state)
            .map_err(|e| Interrupt::Storage(StoreError::Corrupt(e.to_string())))?;
        let hold_until = self.engine.now().plus_millis(millis(left) + HOLD_GRACE_MS);
        let write = Write {
            save: true,
            paused: Some(&state),
            session_move: SessionMove::HandOver { hold_until },
            ..Write::default()
        };
        self.commit(&[], write).await?;
        Ok(Ending::HandedOver)
    }

    /// Carries a claimed turn on: each call of the paused step gets its result (the tool run
    /// when it needed no person or was approved; the answer, the denial or the expiry
    /// otherwise), written with the transcript at once.
    pub(super) async fn resume(
        &mut self,
        paused: &PausedTurn,
        actions: Vec<Action>,
    ) -> Result<(), Interrupt> {
        let mut results = Vec::with_capacity(paused.calls.len());
        for paused_call in &paused.calls {
            let action = paused_call.action_id.as_ref().and_then(|id| actions.iter().find(|a| &a.id == id));
            let resolution = match (&paused_call.action_id, action) {
                (None, _) => Resolution::Run,
                (Some(_), Some(action)) => action.resolution(),
                (Some(_), None) => Resolution::Result {
                    output: json!({"error": "the action was not found"}),
                    is_error: true,
                },
            };
            let result = match resolution {
                Resolution::Run => self.run_tool(paused.step, &paused_call.call).await,
                Resolution::Result { output, is_error } => {
                    self.result_of(paused.step, &paused_call.call, output, is_error)
                }
            };
            results.push(result);
        }
        self.show_viewed();
        self.commit(&results, Write { save: true, ..Write::default() }).await
    }
}
