//! One turn: a user message and everything the agent does until it answers, stops or pauses.
//!
//! Each step is one write ([`TurnStore::commit`]): its events, its usage, the session's state and
//! the transcript together, so a plain turn (one model call) is two writes — begin and end —
//! after the route's one read of the session and its transcript. Every commit holds only while
//! this turn holds the session and no cancel was recorded for it; a refused commit tells the
//! turn that the session was deleted (it stops and writes nothing more), that another turn took
//! it over (it stops and leaves the session to its new holder), or that it was cancelled (it
//! ends with `cancelled`, its last call's spend recorded, its reply unused). Before every model
//! call after the first, one read checks the same.
//!
//! A step whose tool calls need a person (an approval, an `ask_user` question, a client tool)
//! pauses the turn: the commit writes the actions, the transcript with the turn's saved state
//! ([`PausedTurn`]) and `requires_action` on the session, at one transcript version. When the
//! actions are settled, a continuation claims that version once ([`TurnEngine::continue_turn`])
//! and the same turn carries on: each call's result (the tool's, or the answer, denial or
//! expiry) goes to the model.
//!
//! The model's conversation is the session transcript ([`crate::transcript`]); the event log is
//! only written.

use agentplane_domain::action::{
    ASK_USER_TOOL, Action, ActionId, ActionStatus, ActionType, Continuation, Resolution, question_of,
};
use agentplane_domain::agent::{Channel, VersionedConfig};
use agentplane_domain::event::payload::{
    ActionRequired, BudgetReached, MessageText, ToolCall, ToolResult, TurnEnded, TurnFailure, TurnStarted,
    TurnUsage, UsageRecorded,
};
use agentplane_domain::event::{EventPayload, NewEvent};
use agentplane_domain::ids::AgentId;
use agentplane_domain::pricing::Usage;
use agentplane_domain::session::{SessionBudget, StopReason};
use agentplane_domain::{ProjectId, SessionId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use thiserror::Error;
use tokio::time::{Duration, Instant};

use crate::TurnEngine;
use crate::model::{ChatMessage, ModelError, ToolDefinition, WireToolCall};
use crate::ports::{
    ChatModel, PortError as StoreError, Refused, SessionMove, StepCommit, StoredTranscript, TranscriptWrite,
    TurnHold, TurnStart, TurnStore, TurnWriteError,
};
use agentplane_store::OutboxEvent;

/// What the route read before the turn: where the session's event log ends and its transcript.
#[derive(Debug, Clone, Default)]
pub struct TurnContext {
    pub last_event_seq: u64,
    pub transcript: Option<StoredTranscript>,
    /// The session's spend before this turn (what its budget is checked against).
    pub spent_usd: f64,
    /// Whether the project has webhook endpoints: the turn's state changes then emit events
    /// (`session.idled`, `action.required`, `budget.reached`) in their own commits.
    pub webhooks: bool,
    /// The session's superseded turns: left out of the conversation the model is given.
    pub superseded: Vec<String>,
}

/// Earlier turns a new turn replaces: the last one (`regenerate`, the same user message again)
/// or an edited message's turn and every later one (`edit`).
#[derive(Debug, Clone, PartialEq)]
pub struct Supersede {
    pub turn_ids: Vec<String>,
    pub reason: agentplane_domain::event::payload::SupersedeReason,
    /// The edited message's event.
    pub event_id: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct TurnRequest {
    pub project_id: ProjectId,
    pub session_id: SessionId,
    pub agent_id: AgentId,
    pub channel: Channel,
    pub version: Option<u32>,
    pub config: VersionedConfig,
    pub input: String,
    /// When the turn must stop (the synchronous timeout): it then ends with `limit`.
    pub deadline: Instant,
    /// The session as the route read it; `None`: the turn reads it.
    pub context: Option<TurnContext>,
    /// The session budget the turn runs under (the session's own, else the agent's).
    pub budget: Option<SessionBudget>,
    /// The turn's id; `None`: a fresh one (a background run names its own).
    pub turn_id: Option<String>,
    /// When the turn hands itself over to a continuation instead of going on (a background run
    /// nearing its invocation's end); `None`: it never does.
    pub handover_at: Option<Instant>,
    /// The tenant whose monthly spend the turn counts toward, and its limit.
    pub tenant: Option<TenantSpend>,
    /// Short-lived URLs of the session's image files given with this message (the model reads
    /// images); later requests carry a note in their place.
    pub images: Vec<String>,
    /// The earlier turns this one replaces (written with its start: `turn.superseded`).
    pub supersede: Option<Supersede>,
}

/// A project of a tenant: the turn's spend is added to the tenant's monthly counter, and at the
/// tenant's limit the turn pauses before its next model call, as for a session budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantSpend {
    pub key: String,
    pub monthly_limit_usd: Option<f64>,
    /// The tenant has webhook endpoints of its own: the turn emits events for them even when
    /// its project has none (read with the tenant, no extra round trip).
    #[serde(default)]
    pub webhooks: bool,
}

/// A session budget that stopped a turn before a model call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetHit {
    /// `true`: the turn waits (raise the budget to carry it on); `false`: it ended.
    pub paused: bool,
    pub spent_usd: f64,
    pub max_cost_usd: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub turn_id: String,
    pub stop_reason: StopReason,
    pub output_text: Option<String>,
    pub usage: Usage,
    pub cost_usd: f64,
    /// The part of `usage` spent on models with no price (not in `cost_usd`).
    pub unpriced: Usage,
    /// Why a turn ended in `error`: a stable code and a message safe to show.
    pub error: Option<(String, String)>,
    /// The actions the turn waits for (`stop_reason: requires_action`).
    pub actions: Vec<Action>,
    /// Set when the session budget paused or ended the turn (`stop_reason: budget_reached`).
    pub budget: Option<BudgetHit>,
    /// Set when the turn handed itself over: the transcript version its continuation claims.
    pub handed_over: Option<u64>,
}

#[derive(Debug, Error)]
pub enum TurnError {
    #[error("another turn is running in this session")]
    Busy,
    #[error("the session's turn waits for actions")]
    ActionsPending(Vec<ActionId>),
    #[error("the session's turn is paused by its budget")]
    BudgetPaused { spent_usd: f64, max_cost_usd: Option<f64> },
    #[error("the model has no price, and a budget applies")]
    ModelNotPriced { model: String },
    #[error("session not found")]
    SessionNotFound,
    #[error(transparent)]
    Storage(StoreError),
}

/// How long past its deadline a turn keeps its session before another turn may take it over.
const HOLD_GRACE_MS: i64 = 60_000;
/// The longest a continuation runs (Lambda's 15 minutes, less room for the bookkeeping).
const CONTINUATION_CEILING: Duration = Duration::from_secs(14 * 60);

/// A paused turn's saved state, kept with the transcript at the version the pause wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PausedTurn {
    pub agent_id: AgentId,
    pub channel: Channel,
    pub version: Option<u32>,
    pub config: VersionedConfig,
    /// The step whose calls wait.
    pub step: u32,
    /// That step's calls in the model's order, with the action each waits for.
    pub calls: Vec<PausedCall>,
    pub usage: Usage,
    pub cost_usd: f64,
    pub unpriced: Usage,
    /// How long the turn may run once it carries on.
    pub budget_ms: u64,
    /// Paused by the session budget (no calls wait): it carries on once the budget is raised.
    #[serde(default)]
    pub for_budget: bool,
    /// The budget the turn ran under (the agent's applies again on carrying on unless the
    /// session has its own by then).
    #[serde(default)]
    pub spend_budget: Option<SessionBudget>,
    /// Handed over (no calls wait, nothing to answer): it carries on at once, with what is left
    /// of its time (`budget_ms`).
    #[serde(default)]
    pub for_handover: bool,
    #[serde(default)]
    pub tenant: Option<TenantSpend>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PausedCall {
    pub call: WireToolCall,
    pub action_id: Option<ActionId>,
}

/// How the loop ended, before bookkeeping.
enum Ending {
    /// Answered; the ending is written.
    Answered(String),
    /// Paused for actions; written.
    Paused(Vec<Action>),
    /// Paused by the budget; written.
    BudgetPaused(BudgetHit),
    /// The budget ended it (`on_exceed: stop`).
    BudgetStopped(BudgetHit),
    /// Handed over to a continuation; written.
    HandedOver,
    Limit(&'static str),
    Failed(String, String),
    /// A cancel was recorded for this turn: it ends with `cancelled`.
    Cancelled,
    /// The session was deleted while the turn ran: nothing more is written for it.
    SessionGone,
    /// Another turn holds the session now: nothing more is written, the session is not released.
    LeaseLost,
}

/// Why the loop stopped before an ending of its own.
enum Interrupt {
    SessionGone,
    LeaseLost,
    Cancelled,
    Storage(StoreError),
}

impl From<StoreError> for Interrupt {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound => Self::SessionGone,
            other => Self::Storage(other),
        }
    }
}

/// The config and limits a turn runs with, from its request or its saved state.
struct Plan {
    project_id: ProjectId,
    session_id: SessionId,
    agent_id: AgentId,
    channel: Channel,
    version: Option<u32>,
    config: VersionedConfig,
    deadline: Instant,
    budget: Duration,
    spend_budget: Option<SessionBudget>,
    handover_at: Option<Instant>,
    tenant: Option<TenantSpend>,
}

struct Turn<'a, S, M> {
    engine: &'a TurnEngine<S, M>,
    plan: Plan,
    turn_id: String,
    usage: Usage,
    cost_usd: f64,
    unpriced: Usage,
    /// The session's spend apart from this turn's (the budget counts both).
    spent_base: f64,
    /// The budget that ended the turn (`on_exceed: stop`).
    budget_hit: Option<BudgetHit>,
    /// A model call's usage not written yet (a refused commit): the ending writes it.
    unrecorded: Option<(UsageRecorded, Usage, Option<f64>)>,
    /// Where the next append starts: one past the last event this turn wrote.
    next_seq: u64,
    /// The transcript version this turn holds, and the S3 object it lives in.
    transcript_version: u64,
    transcript_object: Option<String>,
    messages: Vec<ChatMessage>,
    /// `messages[start..]` is the transcript (the instructions come first, afresh each turn).
    start: usize,
    /// Where each turn of the transcript begins, this one's last.
    marks: Vec<crate::transcript::TurnMark>,
    /// Whether its state changes emit webhook events (the project has endpoints).
    webhooks: bool,
    /// URLs of the images this step's `view_image` calls showed, for the next model call.
    viewed: Vec<String>,
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
}

impl<S: TurnStore, M: ChatModel> TurnEngine<S, M> {
    /// Runs a turn to its end or its pause. Call it from a spawned task: the turn must finish
    /// (and release the session) even when the caller goes away.
    pub async fn run_turn(&self, request: TurnRequest) -> Result<TurnOutcome, TurnError> {
        if request.budget.is_some() && self.prices.price(&request.config.model).is_none() {
            return Err(TurnError::ModelNotPriced { model: request.config.model.clone() });
        }
        let turn_id =
            request.turn_id.clone().unwrap_or_else(|| format!("turn_{}", crate::random_hex::<12>()));
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
        let (history, marks) = match &context.transcript {
            Some(stored) => crate::transcript::decode_marked(&stored.body).map_err(storage)?,
            None => (Vec::new(), Vec::new()),
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
                let id = agentplane_domain::webhook::MessageId::from_random(crate::random_bytes::<12>());
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

fn storage(err: StoreError) -> TurnError {
    match err {
        StoreError::NotFound => TurnError::SessionNotFound,
        other => TurnError::Storage(other),
    }
}

fn ended_event(
    stop_reason: StopReason,
    limit: Option<&str>,
    usage: Usage,
    unpriced: Usage,
    cost_usd: f64,
) -> EventPayload {
    EventPayload::TurnEnded(TurnEnded {
        stop_reason,
        limit: limit.map(str::to_owned),
        usage: TurnUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            total_tokens: usage.total_tokens(),
            unpriced_input_tokens: unpriced.input_tokens,
            unpriced_output_tokens: unpriced.output_tokens,
        },
        cost_usd,
        extra: Map::new(),
    })
}

/// What a step's commit writes besides its events.
struct Write<'a> {
    usage: Option<(Usage, Option<f64>)>,
    save: bool,
    paused: Option<&'a str>,
    session_move: SessionMove,
    actions: &'a [Action],
    despite_cancel: bool,
}

impl Default for Write<'_> {
    fn default() -> Self {
        Self {
            usage: None,
            save: false,
            paused: None,
            session_move: SessionMove::Stay,
            actions: &[],
            despite_cancel: false,
        }
    }
}

impl<S: TurnStore, M: ChatModel> Turn<'_, S, M> {
    /// Writes one step; a refusal becomes the interrupt it means.
    async fn commit(&mut self, events_in: &[EventPayload], write: Write<'_>) -> Result<(), Interrupt> {
        let events: Vec<NewEvent> =
            events_in.iter().map(|p| NewEvent::from_payload(p, Some(self.turn_id.clone()))).collect();
        let body = match write.save {
            true => Some(crate::transcript::encode(&self.messages[self.start..], &self.marks)?),
            false => None,
        };
        let emit = if self.webhooks { self.webhook_events(events_in, &write) } else { Vec::new() };
        let commit = StepCommit {
            project: &self.plan.project_id,
            session: &self.plan.session_id,
            turn_id: &self.turn_id,
            now: self.engine.now(),
            events: &events,
            retention_days: self.engine.bus.retention_days(),
            from_seq: self.next_seq,
            usage: write.usage,
            transcript: body.as_deref().map(|body| TranscriptWrite {
                body,
                expected: self.transcript_version,
                replaces: self.transcript_object.as_deref(),
                paused: write.paused,
            }),
            session_move: write.session_move,
            actions: write.actions,
            despite_cancel: write.despite_cancel,
            spend_counter: self.plan.tenant.as_ref().map(|t| t.key.as_str()),
            emit: &emit,
        };
        match self.engine.store.commit(&commit).await {
            Ok(committed) => {
                self.engine.store.dispatch_webhooks(&emit).await;
                if let Some(last) = committed.events.last() {
                    self.next_seq = last.seq + 1;
                }
                if let Some((version, object)) = committed.transcript {
                    self.transcript_version = version;
                    self.transcript_object = object;
                }
                if !committed.events.is_empty() {
                    self.engine.bus.notify(&self.plan.session_id);
                }
                Ok(())
            }
            Err(TurnWriteError::Refused(Refused::NotHeld)) => Err(self.why_not_held().await),
            Err(TurnWriteError::Refused(_)) => Err(Interrupt::LeaseLost),
            Err(TurnWriteError::Store(err)) => Err(err.into()),
        }
    }

    /// The webhook events a step's write emits: `budget.reached` with the budget's event,
    /// `session.idled` when the session goes idle, `action.required` when it pauses for actions.
    fn webhook_events(&self, events: &[EventPayload], write: &Write<'_>) -> Vec<OutboxEvent> {
        use agentplane_domain::webhook::events as hook;
        let (p, s, t) = (&self.plan.project_id, &self.plan.session_id, self.turn_id.as_str());
        let mut found: Vec<(&str, Value)> = Vec::new();
        for event in events {
            if let EventPayload::BudgetReached(b) = event {
                found.push((
                    hook::BUDGET_REACHED,
                    hook::budget_reached(p, s, t, b.on_exceed, b.spent_usd, b.max_cost_usd),
                ));
            }
        }
        match &write.session_move {
            SessionMove::End(reason) => {
                found.push((hook::SESSION_IDLED, hook::session_idled(p, s, t, *reason)))
            }
            SessionMove::Pause { budget: false } => {
                found.push((hook::ACTION_REQUIRED, hook::action_required(p, s, t, write.actions)))
            }
            SessionMove::Pause { budget: true } | SessionMove::Stay | SessionMove::HandOver { .. } => {}
        }
        let now = self.engine.now();
        found
            .into_iter()
            .map(|(kind, data)| {
                let id = agentplane_domain::webhook::MessageId::from_random(crate::random_bytes::<12>());
                OutboxEvent::new(id, *p, kind, &data, now)
            })
            .collect()
    }

    async fn why_not_held(&self) -> Interrupt {
        match self.engine.store.turn_hold(&self.plan.project_id, &self.plan.session_id, &self.turn_id).await {
            Ok(TurnHold::Cancelled) => Interrupt::Cancelled,
            Ok(TurnHold::Held | TurnHold::Lost) => Interrupt::LeaseLost,
            Err(err) => err.into(),
        }
    }

    /// Stops the turn once the session is deleted or another turn holds it; a recorded cancel
    /// stops it too.
    async fn ensure_live(&self) -> Result<(), Interrupt> {
        match self.engine.store.turn_hold(&self.plan.project_id, &self.plan.session_id, &self.turn_id).await?
        {
            TurnHold::Held => Ok(()),
            TurnHold::Cancelled => Err(Interrupt::Cancelled),
            TurnHold::Lost => Err(Interrupt::LeaseLost),
        }
    }

    fn ending_of(interrupt: Interrupt) -> Ending {
        match interrupt {
            Interrupt::SessionGone => Ending::SessionGone,
            Interrupt::LeaseLost => Ending::LeaseLost,
            Interrupt::Cancelled => Ending::Cancelled,
            Interrupt::Storage(err) => {
                tracing::error!(error = %err, "storage failed during a turn");
                Ending::Failed("storage_unavailable".into(), "storage failed during the turn".into())
            }
        }
    }

    /// Where `view_image` finds images, when the turn offers it: the running config takes
    /// attachments and its model reads images.
    fn image_source(&self) -> Option<&dyn crate::images::ImageSource> {
        let config = &self.plan.config;
        self.engine
            .images
            .as_deref()
            .filter(|images| config.attachments.enabled && images.reads_images(&config.model))
    }

    /// The images this step's `view_image` calls showed, as a user message after its tool
    /// results (where the next model call sees them; later requests get a note instead).
    fn show_viewed(&mut self) {
        if self.viewed.is_empty() {
            return;
        }
        let urls = std::mem::take(&mut self.viewed);
        self.messages.push(ChatMessage::User {
            content: crate::model::UserContent::with_images(crate::images::VIEWED_NOTE.into(), &urls),
        });
    }

    /// The tools the model is offered: the agent's, `ask_user` when questions are on, its
    /// client tools, and `view_image` when the turn can show images.
    fn tool_definitions(&self) -> Vec<ToolDefinition> {
        let config = &self.plan.config;
        let mut tools = self.engine.tools.definitions(&config.tools);
        if self.image_source().is_some() {
            tools.push(crate::images::definition());
        }
        if config.human_in_the_loop.questions_enabled {
            tools.push(ToolDefinition {
                name: ASK_USER_TOOL.into(),
                description: "Ask the user a question and wait for the answer.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"question": {"type": "string", "description": "What to ask."}},
                    "required": ["question"],
                }),
            });
        }
        tools.extend(config.human_in_the_loop.client_tools.iter().map(|t| ToolDefinition {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: t.parameters.clone(),
        }));
        tools
    }

    /// The action a call waits for, if any.
    fn action_type(&self, name: &str) -> Option<ActionType> {
        let hitl = &self.plan.config.human_in_the_loop;
        if name == ASK_USER_TOOL && hitl.questions_enabled {
            Some(ActionType::Question)
        } else if hitl.client_tools.iter().any(|t| t.name == name) {
            Some(ActionType::ClientTool)
        } else if hitl.tool_approvals.iter().any(|t| t == name)
            && self.plan.config.tools.iter().any(|t| t == name)
        {
            Some(ActionType::Approval)
        } else {
            None
        }
    }

    async fn drive(&mut self, from_step: u32, check_first: bool) -> Ending {
        match self.steps(from_step, check_first).await {
            Ok(ending) => ending,
            Err(interrupt) => Self::ending_of(interrupt),
        }
    }

    async fn steps(&mut self, from_step: u32, check_first: bool) -> Result<Ending, Interrupt> {
        let tools = self.tool_definitions();
        for step in from_step..=self.plan.config.max_steps {
            if Instant::now() >= self.plan.deadline {
                return Ok(Ending::Limit("timeout"));
            }
            // At least one step per invocation, so a handover always makes progress.
            if step > from_step && self.plan.handover_at.is_some_and(|at| Instant::now() >= at) {
                return self.hand_over(step).await;
            }
            // The step's commit checked the hold; a step after a tool round checks it again,
            // so a cancel that came meanwhile costs no model call.
            if step > from_step || check_first {
                self.ensure_live().await?;
            }
            if let Some(budget) = self.plan.spend_budget {
                let spent = self.spent_base + self.cost_usd;
                if budget.reached(spent) {
                    let paused = budget.on_exceed == agentplane_domain::agent::BudgetAction::Pause;
                    let hit = BudgetHit { paused, spent_usd: spent, max_cost_usd: budget.max_cost_usd };
                    if !paused {
                        return Ok(Ending::BudgetStopped(hit));
                    }
                    return self.pause_for_budget(step, hit).await;
                }
            }
            if let Some((key, hit)) = self.tenant_limit_hit().await? {
                // Noted first: a noted pause that never happened is skipped by its reader.
                self.engine
                    .store
                    .note_tenant_pause(&key, &self.plan.project_id, &self.plan.session_id)
                    .await?;
                return self.pause_for_budget(step, hit).await;
            }
            let reply = match self
                .engine
                .model
                .complete(&self.plan.config.model, &self.messages, &tools, self.plan.deadline)
                .await
            {
                Ok(reply) => reply,
                Err(ModelError::Timeout) if Instant::now() >= self.plan.deadline => {
                    return Ok(Ending::Limit("timeout"));
                }
                Err(err) => return Ok(Ending::Failed(err.code().into(), err.to_string())),
            };
            // A model without a price is recorded as unpriced, never as a $0 spend.
            let cost = self.engine.prices.cost_usd(&self.plan.config.model, reply.usage);
            self.usage = self.usage + reply.usage;
            self.cost_usd += cost.unwrap_or(0.0);
            if cost.is_none() {
                self.unpriced = self.unpriced + reply.usage;
            }
            let recorded = UsageRecorded {
                step,
                model: self.plan.config.model.clone(),
                input_tokens: reply.usage.input_tokens,
                output_tokens: reply.usage.output_tokens,
                cost_usd: cost.unwrap_or(0.0),
                priced: cost.is_some(),
                extra: Map::new(),
            };
            self.unrecorded = Some((recorded.clone(), reply.usage, cost));
            let usage_event = EventPayload::Usage(recorded);

            if reply.tool_calls.is_empty() {
                let text = reply.text.unwrap_or_default();
                self.messages
                    .push(ChatMessage::Assistant { content: Some(text.clone()), tool_calls: Vec::new() });
                let ended = ended_event(StopReason::EndTurn, None, self.usage, self.unpriced, self.cost_usd);
                let events =
                    [usage_event, EventPayload::AssistantMessage(MessageText::new(text.clone())), ended];
                let write = Write {
                    usage: Some((reply.usage, cost)),
                    save: true,
                    session_move: SessionMove::End(StopReason::EndTurn),
                    ..Write::default()
                };
                if let Err(interrupt) = self.commit(&events, write).await {
                    // Not saved: the answer is not part of the conversation.
                    self.messages.pop();
                    return Err(interrupt);
                }
                self.unrecorded = None;
                return Ok(Ending::Answered(text));
            }

            // All of the step's calls first (as the model asked for them), then each result.
            let mut events = vec![usage_event];
            events.extend(reply.tool_calls.iter().enumerate().map(|(i, call)| {
                EventPayload::ToolCall(ToolCall {
                    step,
                    call_id: call.id.clone(),
                    name: call.function.name.clone(),
                    arguments: arguments_of(call),
                    arguments_text: call.function.arguments.clone(),
                    assistant_text: if i == 0 { reply.text.clone() } else { None },
                    truncated: false,
                    extra: Map::new(),
                })
            }));
            self.messages.push(ChatMessage::Assistant {
                content: reply.text.clone(),
                tool_calls: reply.tool_calls.clone(),
            });
            let waits: Vec<(WireToolCall, Option<ActionType>)> =
                reply.tool_calls.iter().map(|c| (c.clone(), self.action_type(&c.function.name))).collect();
            if waits.iter().any(|(_, kind)| kind.is_some()) {
                return self.pause(step, events, waits, (reply.usage, cost)).await;
            }
            let written =
                self.commit(&events, Write { usage: Some((reply.usage, cost)), ..Write::default() }).await;
            if let Err(interrupt) = written {
                self.messages.pop();
                return Err(interrupt);
            }
            self.unrecorded = None;
            let mut results = Vec::with_capacity(reply.tool_calls.len());
            for call in &reply.tool_calls {
                results.push(self.run_tool(step, call).await);
            }
            self.show_viewed();
            self.commit(&results, Write { save: true, ..Write::default() }).await?;
        }
        Ok(Ending::Limit("max_steps"))
    }

    /// Runs one call and returns its `tool.result`; the result joins the conversation.
    async fn run_tool(&mut self, step: u32, call: &WireToolCall) -> EventPayload {
        let remaining = self.plan.deadline.saturating_duration_since(Instant::now());
        let run = async {
            match self.image_source() {
                Some(images) if call.function.name == crate::images::VIEW_IMAGE_TOOL => {
                    let file_id = crate::images::file_id_of(&call.function.arguments)?;
                    let viewed = images.view(&self.plan.project_id, &self.plan.session_id, &file_id).await?;
                    Ok((viewed.about, Some(viewed.url)))
                }
                _ => self
                    .engine
                    .tools
                    .call(&self.plan.config.tools, &call.function.name, &call.function.arguments)
                    .await
                    .map(|output| (output, None)),
            }
        };
        let outcome = tokio::time::timeout(remaining, run)
            .await
            .unwrap_or_else(|_| Err("the tool did not finish before the turn's deadline".into()));
        let outcome = outcome.map(|(output, url)| {
            self.viewed.extend(url);
            output
        });
        let (output, is_error) = match outcome {
            Ok(value) => (value, false),
            Err(message) => (json!(message), true),
        };
        self.result_of(step, call, output, is_error)
    }

    /// A call's result: the event, and the tool message the model reads.
    fn result_of(&mut self, step: u32, call: &WireToolCall, output: Value, is_error: bool) -> EventPayload {
        let content = match (&output, is_error) {
            (Value::String(message), true) => format!("error: {message}"),
            (other, true) => format!("error: {other}"),
            (other, false) => other.to_string(),
        };
        self.messages.push(ChatMessage::Tool { tool_call_id: call.id.clone(), content });
        EventPayload::ToolResult(ToolResult {
            step,
            call_id: call.id.clone(),
            name: call.function.name.clone(),
            output,
            is_error,
            truncated: false,
            extra: Map::new(),
        })
    }

    /// Pauses the turn for the step's calls that need a person: one write of the calls, the
    /// actions, their `action.required` events, the transcript with the saved state, and
    /// `requires_action` on the session.
    async fn pause(
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
                    id: ActionId::from_random(crate::random_bytes::<12>()),
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
    fn saved_state(&self, step: u32, calls: Vec<PausedCall>, for_budget: bool) -> Result<String, Interrupt> {
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
    async fn pause_for_budget(&mut self, step: u32, hit: BudgetHit) -> Result<Ending, Interrupt> {
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
    async fn tenant_limit_hit(&self) -> Result<Option<(String, BudgetHit)>, Interrupt> {
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
    async fn hand_over(&mut self, step: u32) -> Result<Ending, Interrupt> {
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
    async fn resume(&mut self, paused: &PausedTurn, actions: Vec<Action>) -> Result<(), Interrupt> {
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

    /// Records the end and releases the session, unless the ending was written with its step.
    async fn finish(mut self, ending: Ending) -> Result<TurnOutcome, TurnError> {
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

    fn outcome(
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

fn budget_event(hit: BudgetHit) -> EventPayload {
    EventPayload::BudgetReached(BudgetReached {
        spent_usd: hit.spent_usd,
        max_cost_usd: hit.max_cost_usd,
        on_exceed: if hit.paused {
            agentplane_domain::agent::BudgetAction::Pause
        } else {
            agentplane_domain::agent::BudgetAction::Stop
        },
        extra: Map::new(),
    })
}

/// A call's arguments as JSON, or the model's text when it was not JSON.
fn arguments_of(call: &WireToolCall) -> Value {
    serde_json::from_str(&call.function.arguments).unwrap_or(Value::String(call.function.arguments.clone()))
}

#[cfg(test)]
mod tests;
