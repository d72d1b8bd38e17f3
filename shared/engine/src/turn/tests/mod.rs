//! The turn loop over in-memory ports: a fake session store and event log, and a scripted model
//! that can change the store while it "thinks" (delete the session, take the turn over).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use agentplane_domain::action::{Action, ActionId, ActionStatus, Answer, Continuation, Decision};
use agentplane_domain::agent::{Channel, ClientTool, HumanInTheLoop, VersionedConfig};
use agentplane_domain::event::{Event, EventType, NewEvent};
use agentplane_domain::ids::AgentId;
use agentplane_domain::pricing::{PriceTable, Usage};
use agentplane_domain::session::{NewSession, Session, SessionBudget, StopReason};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{TurnError, TurnRequest};
use crate::model::{ChatMessage, ModelError, ModelReply, ToolDefinition, WireFunction, WireToolCall};
use crate::ports::{
    ChatModel, Committed, PortError, Refused, SessionMove, StepCommit, StoredTranscript, TurnHold, TurnStart,
    TurnStore, TurnWriteError,
};
use crate::{EventBus, TurnEngine};

#[derive(Debug, Default)]
struct FakeSession {
    deleted: bool,
    holder: Option<String>,
    hold_until: Option<Timestamp>,
    stop_reason: Option<StopReason>,
    usage: Usage,
    cost_usd: f64,
    /// The turn a cancel was recorded for (as `POST …/cancel` records it on the holder).
    cancelled_turn: Option<String>,
    /// The transcript version a pause wrote (while `requires_action` or `budget_paused`).
    paused_at: Option<u64>,
    /// Paused by the budget (`budget_paused`), not for actions.
    budget_paused: bool,
    /// Spend before the turns of a test (what a budget counts besides the turn's own).
    cost_before: f64,
}

impl FakeSession {
    fn cancel(&mut self) {
        self.cancelled_turn = self.holder.clone();
    }
}

#[derive(Debug, Default)]
struct State {
    sessions: HashMap<SessionId, FakeSession>,
    events: HashMap<SessionId, Vec<Event>>,
    /// Body, version, saved paused state.
    transcripts: HashMap<SessionId, (String, u64, Option<String>)>,
    actions: HashMap<ActionId, Action>,
    /// Records a cancel right after an event of this type is appended (between two checks).
    cancel_after: Option<EventType>,
    /// The session's own budget, as a continuation's claim reads it.
    budgets: HashMap<SessionId, SessionBudget>,
    /// What the tenant spent this month.
    tenant_spent: f64,
    /// Whether the project has webhook endpoints.
    webhooks: bool,
    /// The webhook events committed writes emitted (type, data), in order.
    emitted: Vec<(String, Value)>,
    /// How many events were sent on after their commit.
    dispatched: usize,
}

fn state_budget(state: &MutexGuard<'_, State>, session: &SessionId) -> Option<SessionBudget> {
    state.budgets.get(session).copied()
}

#[derive(Debug, Clone, Default)]
struct FakeStore(Arc<Mutex<State>>);

impl FakeStore {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn with_session(&self, id: SessionId, f: impl FnOnce(&mut FakeSession)) {
        if let Some(session) = self.state().sessions.get_mut(&id) {
            f(session);
        }
    }

    fn event_types(&self, id: SessionId) -> Vec<String> {
        let state = self.state();
        state
            .events
            .get(&id)
            .map(|e| e.iter().map(|e| e.kind.as_str().to_owned()).collect())
            .unwrap_or_default()
    }

    fn event(&self, id: SessionId, kind: &EventType) -> Option<Value> {
        self.state().events.get(&id)?.iter().find(|e| e.kind == *kind).map(|e| e.data.clone())
    }

    fn append(state: &mut State, session: &SessionId, events: &[NewEvent], now: Timestamp) -> Vec<Event> {
        let cancel_after = state.cancel_after.clone();
        let log = state.events.entry(*session).or_default();
        let mut out = Vec::new();
        for event in events {
            let event = Event {
                session_id: *session,
                seq: log.len() as u64 + 1,
                kind: event.kind.clone(),
                turn_id: event.turn_id.clone(),
                data: event.data.clone(),
                created_at: now,
            };
            log.push(event.clone());
            out.push(event);
        }
        if out.iter().any(|e| Some(&e.kind) == cancel_after.as_ref())
            && let Some(s) = state.sessions.get_mut(session)
        {
            s.cancel();
        }
        out
    }

    /// Answers a pending action as a person would.
    fn settle(&self, id: &ActionId, status: ActionStatus, answer: Option<Answer>) {
        if let Some(action) = self.state().actions.get_mut(id) {
            let _ = action.settle(status, answer, Timestamp::from_unix_millis(0));
        }
    }
}

fn emitted(event: &crate::ports::OutboxEvent) -> (String, Value) {
    let body: Value = serde_json::from_str(&event.payload).unwrap_or(Value::Null);
    (event.event_type.clone(), body["data"].clone())
}

fn refused(why: Refused) -> TurnWriteError {
    TurnWriteError::Refused(why)
}

impl TurnStore for FakeStore {
    async fn begin(&self, start: &TurnStart<'_>) -> Result<Vec<Event>, TurnWriteError> {
        let mut state = self.state();
        let current = state.transcripts.get(start.session).map_or(0, |t| t.1);
        let session =
            state.sessions.get_mut(start.session).filter(|s| !s.deleted).ok_or(refused(Refused::Gone))?;
        if session.paused_at.is_some() {
            return Err(refused(if session.budget_paused { Refused::BudgetPaused } else { Refused::Paused }));
        }
        if session.holder.is_some() && session.hold_until.is_some_and(|until| until >= start.now) {
            return Err(refused(Refused::Busy));
        }
        if current != start.transcript_version {
            return Err(refused(Refused::TranscriptMoved));
        }
        session.holder = Some(start.turn_id.to_owned());
        session.hold_until = Some(start.hold_until);
        Ok(Self::append(&mut state, start.session, start.events, start.now))
    }

    async fn commit(&self, commit: &StepCommit<'_>) -> Result<Committed, TurnWriteError> {
        let mut state = self.state();
        let current = state.transcripts.get(commit.session).map_or(0, |t| t.1);
        let session = state.sessions.get(commit.session).ok_or(refused(Refused::NotHeld))?;
        let held = !session.deleted
            && session.holder.as_deref() == Some(commit.turn_id)
            && (commit.despite_cancel || session.cancelled_turn.as_deref() != Some(commit.turn_id));
        if !held {
            return Err(refused(Refused::NotHeld));
        }
        if commit.transcript.as_ref().is_some_and(|t| t.expected != current) {
            return Err(refused(Refused::TranscriptMoved));
        }
        let events = Self::append(&mut state, commit.session, commit.events, commit.now);
        let transcript = commit.transcript.as_ref().map(|t| {
            state
                .transcripts
                .insert(*commit.session, (t.body.to_owned(), t.expected + 1, t.paused.map(str::to_owned)));
            (t.expected + 1, None)
        });
        for action in commit.actions {
            state.actions.insert(action.id.clone(), action.clone());
        }
        let Some(session) = state.sessions.get_mut(commit.session) else {
            return Err(refused(Refused::NotHeld));
        };
        if let Some((usage, cost)) = commit.usage {
            session.usage = session.usage + usage;
            session.cost_usd += cost.unwrap_or(0.0);
        }
        match &commit.session_move {
            SessionMove::Stay => {}
            SessionMove::End(reason) => {
                session.holder = None;
                session.hold_until = None;
                session.cancelled_turn = None;
                session.stop_reason = Some(*reason);
            }
            SessionMove::HandOver { hold_until } => {
                session.paused_at = transcript.as_ref().map(|t| t.0);
                session.hold_until = Some(*hold_until);
            }
            SessionMove::Pause { budget } => {
                session.paused_at = transcript.as_ref().map(|t| t.0);
                session.hold_until = None;
                session.budget_paused = *budget;
                session.stop_reason =
                    Some(if *budget { StopReason::BudgetReached } else { StopReason::RequiresAction });
            }
        }
        state.emitted.extend(commit.emit.iter().map(emitted));
        Ok(Committed { events, transcript })
    }

    async fn has_webhooks(&self, _project: &ProjectId) -> Result<bool, PortError> {
        Ok(self.state().webhooks)
    }

    async fn dispatch_webhooks(&self, events: &[crate::ports::OutboxEvent]) {
        self.state().dispatched += events.len();
    }

    async fn turn_hold(
        &self,
        _project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
    ) -> Result<TurnHold, PortError> {
        let state = self.state();
        let session = state.sessions.get(session).filter(|s| !s.deleted).ok_or(PortError::NotFound)?;
        Ok(match session.holder.as_deref() == Some(turn_id) {
            false => TurnHold::Lost,
            true if session.cancelled_turn.as_deref() == Some(turn_id) => TurnHold::Cancelled,
            true => TurnHold::Held,
        })
    }

    async fn add_usage(
        &self,
        _project: &ProjectId,
        session: &SessionId,
        usage: Usage,
        cost_usd: Option<f64>,
    ) -> Result<(), PortError> {
        let mut state = self.state();
        let session = state.sessions.get_mut(session).filter(|s| !s.deleted).ok_or(PortError::NotFound)?;
        session.usage = session.usage + usage;
        session.cost_usd += cost_usd.unwrap_or(0.0);
        Ok(())
    }

    async fn tenant_spent(&self, _tenant_key: &str, _month: &str) -> Result<f64, PortError> {
        Ok(self.state().tenant_spent)
    }

    async fn load_transcript(
        &self,
        _project: &ProjectId,
        session: &SessionId,
    ) -> Result<Option<StoredTranscript>, PortError> {
        Ok(self.state().transcripts.get(session).map(|(body, version, paused)| StoredTranscript {
            body: body.clone(),
            version: *version,
            paused: paused.clone(),
            object: None,
        }))
    }

    async fn claim(
        &self,
        c: &Continuation,
        now: Timestamp,
        hold_until: Timestamp,
    ) -> Result<Option<Session>, PortError> {
        let mut state = self.state();
        let last = state.events.get(&c.session_id).map_or(0, |e| e.len() as u64);
        let Some(session) = state.sessions.get_mut(&c.session_id).filter(|s| !s.deleted) else {
            return Ok(None);
        };
        if session.paused_at != Some(c.version) || session.holder.as_deref() != Some(c.turn_id.as_str()) {
            return Ok(None);
        }
        session.paused_at = None;
        session.budget_paused = false;
        session.hold_until = Some(hold_until);
        let mut claimed = NewSession::default().into_session(c.session_id, c.project_id, now);
        claimed.last_event_seq = last;
        claimed.cost_usd = session.cost_usd + session.cost_before;
        claimed.budget = state_budget(&state, &c.session_id);
        Ok(Some(claimed))
    }

    async fn actions(
        &self,
        _project: &ProjectId,
        _session: &SessionId,
        ids: &[ActionId],
    ) -> Result<Vec<Action>, PortError> {
        let state = self.state();
        Ok(ids.iter().filter_map(|id| state.actions.get(id).cloned()).collect())
    }

    async fn pending_actions(
        &self,
        _project: &ProjectId,
        session: &SessionId,
    ) -> Result<Vec<Action>, PortError> {
        let state = self.state();
        let mut pending: Vec<Action> = state
            .actions
            .values()
            .filter(|a| a.session_id == *session && a.status == ActionStatus::Pending)
            .cloned()
            .collect();
        pending.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(pending)
    }

    async fn cancel_actions(
        &self,
        _project: &ProjectId,
        _session: &SessionId,
        turn_id: &str,
        now: Timestamp,
    ) -> Result<Vec<Action>, PortError> {
        let mut state = self.state();
        let mut cancelled = Vec::new();
        for action in state.actions.values_mut().filter(|a| a.turn_id == turn_id) {
            if action.settle(ActionStatus::Cancelled, None, now).is_ok() {
                cancelled.push(action.clone());
            }
        }
        Ok(cancelled)
    }

    async fn end_paused(
        &self,
        _project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
        stop_reason: StopReason,
        events: &[NewEvent],
        _from_seq: u64,
        now: Timestamp,
        _retention_days: i64,
        emit: &[crate::ports::OutboxEvent],
    ) -> Result<Vec<Event>, TurnWriteError> {
        let mut state = self.state();
        let s = state.sessions.get_mut(session).ok_or(refused(Refused::NotHeld))?;
        if s.paused_at.is_none() || s.holder.as_deref() != Some(turn_id) {
            return Err(refused(Refused::NotHeld));
        }
        s.paused_at = None;
        s.budget_paused = false;
        s.holder = None;
        s.stop_reason = Some(stop_reason);
        state.emitted.extend(emit.iter().map(emitted));
        Ok(Self::append(&mut state, session, events, now))
    }
}

/// One scripted model call: it may act on the store before it answers.
type Step = Box<dyn FnOnce(&FakeStore) -> Result<ModelReply, ModelError> + Send>;

struct FakeModel {
    store: FakeStore,
    steps: Mutex<VecDeque<Step>>,
    /// The messages of every call, in order.
    requests: Mutex<Vec<Vec<ChatMessage>>>,
}

impl ChatModel for FakeModel {
    async fn complete(
        &self,
        _model: &str,
        messages: &[ChatMessage],
        _tools: &[ToolDefinition],
        _deadline: Instant,
    ) -> Result<ModelReply, ModelError> {
        self.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(messages.to_vec());
        let step = self.steps.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop_front();
        match step {
            Some(step) => step(&self.store),
            None => Err(ModelError::InvalidResponse("the script ran out".into())),
        }
    }
}

fn text(reply: &str) -> Step {
    let reply = reply.to_owned();
    Box::new(move |_| Ok(ModelReply { text: Some(reply), tool_calls: Vec::new(), usage: usage(10, 5) }))
}

fn tool_call(name: &str, arguments: &Value) -> Step {
    let call = WireToolCall {
        id: "call_1".into(),
        kind: "function".into(),
        function: WireFunction { name: name.to_owned(), arguments: arguments.to_string() },
    };
    Box::new(move |_| Ok(ModelReply { text: None, tool_calls: vec![call], usage: usage(20, 2) }))
}

fn usage(input_tokens: u64, output_tokens: u64) -> Usage {
    Usage { input_tokens, output_tokens }
}

struct Harness {
    store: FakeStore,
    engine: TurnEngine<FakeStore, FakeModel>,
    project: ProjectId,
    session: SessionId,
}

impl Harness {
    fn new(steps: Vec<Step>) -> Self {
        let store = FakeStore::default();
        let session = SessionId::from_random([7; 16]);
        store.state().sessions.insert(session, FakeSession::default());
        let model = FakeModel {
            store: store.clone(),
            steps: Mutex::new(steps.into()),
            requests: Mutex::new(Vec::new()),
        };
        let engine = TurnEngine::with_model(store.clone(), model, PriceTable::default(), EventBus::new(30));
        Self { store, engine, project: ProjectId::from_random([1; 16]), session }
    }

    fn request(&self, tools: &[&str]) -> TurnRequest {
        TurnRequest {
            project_id: self.project,
            session_id: self.session,
            agent_id: AgentId::from_random([2; 16]),
            channel: Channel::Draft,
            version: None,
            config: VersionedConfig {
                model: "gpt-4o".into(),
                instructions: "Be brief.".into(),
                tools: tools.iter().map(|t| (*t).to_owned()).collect(),
                max_steps: 4,
                attachments: Default::default(),
                human_in_the_loop: Default::default(),
                experience: Default::default(),
            },
            input: "hello".into(),
            deadline: Instant::now() + Duration::from_secs(60),
            context: None,
            budget: None,
            turn_id: None,
            handover_at: None,
            tenant: None,
            images: Vec::new(),
            supersede: None,
            replay: None,
        }
    }

    fn requests(&self) -> Vec<Vec<ChatMessage>> {
        self.engine.model.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn session<T>(&self, f: impl FnOnce(&FakeSession) -> T) -> T {
        f(&self.store.state().sessions[&self.session])
    }
}

fn call(id: &str, name: &str, arguments: &Value) -> WireToolCall {
    WireToolCall {
        id: id.into(),
        kind: "function".into(),
        function: WireFunction { name: name.to_owned(), arguments: arguments.to_string() },
    }
}

fn calls(calls: Vec<WireToolCall>) -> Step {
    Box::new(move |_| Ok(ModelReply { text: None, tool_calls: calls, usage: usage(20, 2) }))
}

impl Harness {
    fn hitl_request(&self, tools: &[&str], hitl: HumanInTheLoop) -> TurnRequest {
        let mut request = self.request(tools);
        request.config.human_in_the_loop = hitl;
        request
    }

    fn continuation(&self, turn_id: &str) -> Continuation {
        let version = self.session(|s| s.paused_at).unwrap_or(0);
        Continuation { project_id: self.project, session_id: self.session, turn_id: turn_id.into(), version }
    }
}

fn approvals(tools: &[&str]) -> HumanInTheLoop {
    HumanInTheLoop {
        tool_approvals: tools.iter().map(|t| (*t).to_owned()).collect(),
        ..HumanInTheLoop::default()
    }
}

fn budget(max_cost_usd: f64, on_exceed: agentplane_domain::agent::BudgetAction) -> Option<SessionBudget> {
    Some(SessionBudget { max_cost_usd, on_exceed })
}

mod budgets;
mod emitted;
mod pauses;
mod turns;
