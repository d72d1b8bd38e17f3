//! Starting, carrying on and cancelling a turn: what the engine is asked to do.

use agentplane_domain::action::{Action, ActionId, ActionStatus, Continuation};
use agentplane_domain::event::payload::{MessageText, TurnStarted};
use agentplane_domain::event::{EventPayload, NewEvent};
use agentplane_domain::pricing::Usage;
use agentplane_domain::session::StopReason;
use agentplane_domain::{ProjectId, SessionId};
use serde_json::Map;
use tokio::time::{Duration, Instant};

use crate::TurnEngine;
use crate::model::ChatMessage;
use crate::ports::OutboxEvent;
use crate::ports::{ChatModel, PortError as StoreError, Refused, TurnStart, TurnStore, TurnWriteError};

use super::{
    CONTINUATION_CEILING, HOLD_GRACE_MS, PausedTurn, Plan, Turn, TurnContext, TurnError, TurnOutcome,
    TurnRequest, ended_event, millis, storage,
};

impl<S: TurnStore, M: ChatModel> TurnEngine<S, M> {
    /// Runs a turn to its end or its pause. Call it from a spawned task: the turn must finish
    /// (and release the session) even when the caller goes away.
    pub async fn run_turn(&self, request: TurnRequest) -> Result<TurnOutcome, TurnError> {
        if request.budget.is_some() && self.prices.price(&request.config.model).is_none() {
            return Err(TurnError::ModelNotPriced { model: request.config.model.clone() });
        }
        let turn_id =
            request.turn_id.clone().unwrap_or_else(|| format!("turn_{}", crate::random::unique_hex::<12>()));
        let now = self.now();
        let budget = request.deadline.saturating_duration_since(Instant::now());
        // The session is ours until the deadline plus a grace for the bookkeeping after it;
        // past that, a new turn may take it over from a holder that died.
        let hold_until = now.plus_millis(millis(budget) + HOLD_GRACE_MS);
        let mut context = match request.context.clone() {
            Some(context) => context,
            None => TurnContext {
                last_event_seq: 0,
                spent_usd: 0.0,
                webhooks: self.store.has_webhooks(&request.project_id).await.map_err(storage)?,
                superseded: Vec::new(),
                transcript: self
                    .store
                    .load_transcript(&request.project_id, &request.session_id)
                    .await
                    .map_err(storage)?,
            },
        };
        let mut first = vec![EventPayload::TurnStarted(TurnStarted {
            agent_id: request.agent_id,
            channel: request.channel,
            version: request.version,
            model: request.config.model.clone(),
            extra: Map::new(),
        })];
        if let Some(supersede) = &request.supersede {
            first.push(EventPayload::TurnSuperseded(agentplane_domain::event::payload::TurnSuperseded {
                turn_ids: supersede.turn_ids.clone(),
                reason: supersede.reason,
                event_id: supersede.event_id,
                extra: Map::new(),
            }));
        }
        first.push(EventPayload::UserMessage(MessageText::new(request.input.clone())));
        let supersedes: &[String] = request.supersede.as_ref().map_or(&[], |s| s.turn_ids.as_slice());
        let events: Vec<NewEvent> =
            first.iter().map(|p| NewEvent::from_payload(p, Some(turn_id.clone()))).collect();
        // A transcript saved since the route read it is read again (a turn that just ended).
        let mut attempts = 0;
        let begun = loop {
            let start = TurnStart {
                project: &request.project_id,
                session: &request.session_id,
                turn_id: &turn_id,
                agent: &request.agent_id,
                channel: request.channel,
                now,
                hold_until,
                events: &events,
                retention_days: self.bus.retention_days(),
                from_seq: context.last_event_seq + 1,
                transcript_version: context.transcript.as_ref().map_or(0, |t| t.version),
                supersedes,
            };
            match self.store.begin(&start).await {
                Ok(begun) => break begun,
                // A turn that replaces others does so over the conversation its caller read:
                // another turn came in between.
                Err(TurnWriteError::Refused(Refused::TranscriptMoved)) if !supersedes.is_empty() => {
                    return Err(TurnError::Busy);
                }
                Err(TurnWriteError::Refused(Refused::TranscriptMoved)) if attempts < 3 => {
                    attempts += 1;
                    context.transcript = self
                        .store
                        .load_transcript(&request.project_id, &request.session_id)
                        .await
                        .map_err(storage)?;
                }
                Err(TurnWriteError::Refused(Refused::Paused)) => {
                    let pending = self
                        .store
                        .pending_actions(&request.project_id, &request.session_id)
                        .await
                        .map_err(storage)?;
                    return Err(TurnError::ActionsPending(pending.into_iter().map(|a| a.id).collect()));
                }
                Err(TurnWriteError::Refused(Refused::BudgetPaused)) => {
                    return Err(TurnError::BudgetPaused {
                        spent_usd: context.spent_usd,
                        max_cost_usd: request.budget.map(|b| b.max_cost_usd),
                    });
                }
                Err(TurnWriteError::Refused(Refused::Gone)) => return Err(TurnError::SessionNotFound),
                Err(TurnWriteError::Refused(_)) => return Err(TurnError::Busy),
                Err(TurnWriteError::Store(err)) => return Err(storage(err)),
            }
        };
        self.bus.notify(&request.session_id);
        let replay = request.replay.clone().unwrap_or_default();
        let (history, marks) = match &context.transcript {
            Some(stored) => crate::transcript::decode_marked(&stored.body).map_err(storage)?,
            // A new session starts with the conversation its caller replays, if any.
            None => (replay.before, Vec::new()),
        };
        let mut superseded = context.superseded.clone();
        superseded.extend(supersedes.iter().cloned());
        let (history, mut marks) = crate::transcript::without_turns(history, marks, &superseded);
        marks.push(crate::transcript::TurnMark { turn_id: turn_id.clone(), start: history.len() });
        let mut messages = Vec::new();
        if !request.config.instructions.is_empty() {
            messages.push(ChatMessage::System { content: request.config.instructions.clone() });
        }
        let start = messages.len();
        messages.extend(crate::model::without_images(history));
        messages.push(ChatMessage::User {
            content: crate::model::UserContent::with_images(request.input.clone(), &request.images),
        });
        if context.transcript.is_none() {
            messages.extend(replay.after);
        }
        let webhooks = context.webhooks || request.tenant.as_ref().is_some_and(|t| t.webhooks);
        let mut turn = Turn {
            engine: self,
            plan: Plan {
                project_id: request.project_id,
                session_id: request.session_id,
                agent_id: request.agent_id,
                channel: request.channel,
                version: request.version,
                config: request.config,
                deadline: request.deadline,
                budget,
                spend_budget: request.budget,
                handover_at: request.handover_at,
                tenant: request.tenant,
            },
            turn_id,
            usage: Usage::default(),
            cost_usd: 0.0,
            unpriced: Usage::default(),
            spent_base: context.spent_usd,
            budget_hit: None,
            unrecorded: None,
            next_seq: begun.last().map_or(context.last_event_seq + 1, |e| e.seq + 1),
            transcript_version: context.transcript.as_ref().map_or(0, |t| t.version),
            transcript_object: context.transcript.and_then(|t| t.object),
            messages,
            start,
            marks,
            webhooks,
            viewed: Vec::new(),
        };
        let ending = turn.drive(1, false).await;
        turn.finish(ending).await
    }

    /// Claims the paused turn `continuation` names and runs it on to its next end or pause.
    /// `Ok(None)`: not this delivery's to run (claimed already, cancelled, or gone).
    pub async fn continue_paused(
        &self,
        continuation: &Continuation,
        handover_at: Option<Instant>,
    ) -> Result<Option<TurnOutcome>, TurnError> {
        let (project, session_id) = (continuation.project_id, continuation.session_id);
        // The saved state at the continuation's version, and its actions: a turn carries on only
        // once none is pending (a continuation is sent only then; this keeps it so).
        let stored = self.store.load_transcript(&project, &session_id).await.map_err(storage)?;
        let Some((stored, paused)) = stored.filter(|t| t.version == continuation.version).and_then(|t| {
            t.paused.as_deref().map(serde_json::from_str::<PausedTurn>).map(|p| (t.clone(), p))
        }) else {
            // Carried on already (the transcript moved on), cancelled, or gone.
            return Ok(None);
        };
        let paused =
            paused.map_err(|e| TurnError::Storage(StoreError::Corrupt(format!("paused turn: {e}"))))?;
        let ids: Vec<ActionId> = paused.calls.iter().filter_map(|c| c.action_id.clone()).collect();
        let actions = self.store.actions(&project, &session_id, &ids).await.map_err(storage)?;
        if actions.iter().any(|a| a.status == ActionStatus::Pending) {
            return Ok(None);
        }
        let webhooks = self.store.has_webhooks(&project).await.map_err(storage)?;
        // The tenant's limit as it is now: a raise since the pause carries the turn on.
        let mut tenant = paused.tenant.clone();
        if let Some(spend) = tenant.as_mut() {
            spend.monthly_limit_usd =
                self.store.tenant_limit(&spend.key, spend.monthly_limit_usd).await.map_err(storage)?;
        }
        let now = self.now();
        let budget = Duration::from_millis(paused.budget_ms).min(CONTINUATION_CEILING);
        let hold_until = now.plus_millis(millis(budget) + HOLD_GRACE_MS);
        let Some(session) = self.store.claim(continuation, now, hold_until).await.map_err(storage)? else {
            return Ok(None);
        };
        // A pause may outlast an image's URL: images the turn was given become notes.
        let (history, marks) = crate::transcript::decode_marked(&stored.body).map_err(storage)?;
        let history = crate::model::without_images(history);
        let mut messages = Vec::new();
        if !paused.config.instructions.is_empty() {
            messages.push(ChatMessage::System { content: paused.config.instructions.clone() });
        }
        let start = messages.len();
        messages.extend(history);
        let mut turn = Turn {
            engine: self,
            plan: Plan {
                project_id: project,
                session_id,
                agent_id: paused.agent_id,
                channel: paused.channel,
                version: paused.version,
                config: paused.config.clone(),
                deadline: Instant::now() + budget,
                budget,
                spend_budget: session.budget.or(paused.spend_budget),
                handover_at,
                tenant,
            },
            turn_id: continuation.turn_id.clone(),
            usage: paused.usage,
            cost_usd: paused.cost_usd,
            unpriced: paused.unpriced,
            spent_base: session.cost_usd - paused.cost_usd,
            budget_hit: None,
            unrecorded: None,
            next_seq: session.last_event_seq + 1,
            transcript_version: stored.version,
            transcript_object: stored.object,
            messages,
            start,
            marks,
            webhooks,
            viewed: Vec::new(),
        };
        let ending = if paused.for_handover {
            // Handed over before a model call: that step runs now, after a check that no cancel
            // came meanwhile.
            turn.drive(paused.step, true).await
        } else if paused.for_budget {
            // It stopped before a model call: that step runs now (its budget checked again).
            turn.drive(paused.step, false).await
        } else {
            match turn.resume(&paused, actions).await {
                Ok(()) => turn.drive(paused.step + 1, false).await,
                Err(interrupt) => Turn::<S, M>::ending_of(interrupt),
            }
        };
        turn.finish(ending).await.map(Some)
    }

    /// Ends the paused turn `turn_id` (for actions or by its budget) as `cancelled`: the session
    /// idle, its pending actions `cancelled`, `turn.ended` in the log. `Ok(None)` when it is not
    /// paused (any more).
    pub async fn cancel_paused(
        &self,
        project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
        last_event_seq: u64,
    ) -> Result<Option<Vec<Action>>, TurnError> {
        let turn_id = turn_id.to_owned();
        let stored = self.store.load_transcript(project, session).await.map_err(storage)?;
        let spent = stored
            .and_then(|t| t.paused)
            .and_then(|p| serde_json::from_str::<PausedTurn>(&p).ok())
            .map(|p| (p.usage, p.unpriced, p.cost_usd))
            .unwrap_or_default();
        let ended = ended_event(StopReason::Cancelled, None, spent.0, spent.1, spent.2);
        let events = [NewEvent::from_payload(&ended, Some(turn_id.clone()))];
        let now = self.now();
        let emit: Vec<OutboxEvent> = match self.store.has_webhooks(project).await.map_err(storage)? {
            true => {
                use agentplane_domain::webhook::events as hook;
                let data = hook::session_idled(project, session, &turn_id, StopReason::Cancelled);
                let id = agentplane_domain::webhook::MessageId::from_random(crate::random::unique::<12>());
                vec![OutboxEvent::new(id, *project, hook::SESSION_IDLED, &data, now)]
            }
            false => Vec::new(),
        };
        match self
            .store
            .end_paused(
                project,
                session,
                &turn_id,
                StopReason::Cancelled,
                &events,
                last_event_seq + 1,
                now,
                self.bus.retention_days(),
                &emit,
            )
            .await
        {
            Ok(_) => {
                self.bus.notify(session);
                self.store.dispatch_webhooks(&emit).await;
            }
            Err(TurnWriteError::Refused(_)) => return Ok(None),
            Err(TurnWriteError::Store(err)) => return Err(storage(err)),
        }
        let cancelled = self.store.cancel_actions(project, session, &turn_id, now).await.map_err(storage)?;
        Ok(Some(cancelled))
    }
}
