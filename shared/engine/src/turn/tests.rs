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
        }
    }

    fn requests(&self) -> Vec<Vec<ChatMessage>> {
        self.engine.model.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn session<T>(&self, f: impl FnOnce(&FakeSession) -> T) -> T {
        f(&self.store.state().sessions[&self.session])
    }
}

#[tokio::test]
async fn a_turn_that_answers_completes_records_its_steps_and_releases_the_session() {
    let h = Harness::new(vec![text("hi there")]);
    let outcome = h.engine.run_turn(h.request(&[])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(outcome.output_text.as_deref(), Some("hi there"));
    assert_eq!(outcome.usage, usage(10, 5));
    assert!(outcome.cost_usd > 0.0);
    assert_eq!(outcome.error, None);
    assert_eq!(
        h.store.event_types(h.session),
        ["turn.started", "message.user", "usage", "message.assistant", "turn.ended"]
    );
    let ended = h.store.event(h.session, &EventType::TurnEnded).unwrap();
    assert_eq!(ended["stop_reason"], "end_turn");
    assert_eq!(ended["usage"]["total_tokens"], 15);
    // Released with its stop reason; its usage is on the session.
    assert_eq!(h.session(|s| s.holder.clone()), None);
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::EndTurn));
    assert_eq!(h.session(|s| s.usage), usage(10, 5));
    // The model saw the instructions, then the user's message.
    let requests = h.requests();
    assert_eq!(requests.len(), 1);
    assert!(matches!(&requests[0][0], ChatMessage::System { content } if content == "Be brief."));
    assert!(matches!(&requests[0][1], ChatMessage::User { content } if content == "hello"));
}

#[tokio::test]
async fn a_tool_call_round_runs_the_tool_and_feeds_its_result_back_to_the_model() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 2, "b": 3})), text("it is 5")]);
    let outcome = h.engine.run_turn(h.request(&["add"])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(outcome.output_text.as_deref(), Some("it is 5"));
    assert_eq!(outcome.usage, usage(30, 7));
    assert_eq!(
        h.store.event_types(h.session),
        [
            "turn.started",
            "message.user",
            "usage",
            "tool.call",
            "tool.result",
            "usage",
            "message.assistant",
            "turn.ended"
        ]
    );
    let call = h.store.event(h.session, &EventType::ToolCall).unwrap();
    assert_eq!((call["name"].clone(), call["arguments"].clone()), (json!("add"), json!({"a": 2, "b": 3})));
    let result = h.store.event(h.session, &EventType::ToolResult).unwrap();
    assert_eq!(result["output"], json!({"sum": 5.0}));
    assert_eq!(result["is_error"], false);
    // The second call carries the assistant's call and the tool's answer to it.
    let requests = h.requests();
    assert_eq!(requests.len(), 2);
    let second = &requests[1];
    assert!(matches!(&second[2], ChatMessage::Assistant { tool_calls, .. } if tool_calls.len() == 1));
    assert!(matches!(
        &second[3],
        ChatMessage::Tool { tool_call_id, content } if tool_call_id == "call_1" && content == r#"{"sum":5.0}"#
    ));
    assert_eq!(h.session(|s| s.usage), usage(30, 7));
}

#[tokio::test]
async fn a_tool_the_agent_was_not_given_is_an_error_result_for_the_model_not_a_failed_turn() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 1, "b": 1})), text("sorry")]);
    let outcome = h.engine.run_turn(h.request(&["echo"])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    let result = h.store.event(h.session, &EventType::ToolResult).unwrap();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["output"], "unknown tool `add`");
}

#[tokio::test]
async fn a_failing_model_ends_the_turn_in_error_and_releases_the_session() {
    let h = Harness::new(vec![Box::new(|_| Err(ModelError::Provider(500)))]);
    let outcome = h.engine.run_turn(h.request(&[])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Error);
    assert_eq!(outcome.output_text, None);
    let (code, message) = outcome.error.unwrap();
    assert_eq!(code, "model_provider_error");
    assert_eq!(message, "the model provider answered 500");
    assert_eq!(h.store.event_types(h.session), ["turn.started", "message.user", "error", "turn.ended"]);
    let error = h.store.event(h.session, &EventType::Error).unwrap();
    assert_eq!(error["code"], "model_provider_error");
    assert_eq!(h.store.event(h.session, &EventType::TurnEnded).unwrap()["stop_reason"], "error");
    assert_eq!(h.session(|s| s.holder.clone()), None);
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::Error));
    assert_eq!(h.session(|s| s.usage), Usage::default());
}

#[tokio::test]
async fn a_session_deleted_mid_turn_stops_the_turn_at_its_next_step() {
    let session = SessionId::from_random([7; 16]);
    let delete_then_call: Step = Box::new(move |store: &FakeStore| {
        store.with_session(session, |s| s.deleted = true);
        tool_call("add", &json!({"a": 1, "b": 2}))(store)
    });
    let h = Harness::new(vec![delete_then_call, text("never asked")]);
    assert_eq!(h.session, session);
    let result = h.engine.run_turn(h.request(&["add"])).await;
    assert!(matches!(result, Err(TurnError::SessionNotFound)), "{result:?}");
    // Nothing after the deletion: no usage, no tool call, no end; the model is not asked again.
    assert_eq!(h.store.event_types(h.session), ["turn.started", "message.user"]);
    assert_eq!(h.requests().len(), 1);
    assert_eq!(h.session(|s| s.usage), Usage::default());
    assert_eq!(h.session(|s| s.stop_reason), None);
}

#[tokio::test]
async fn a_turn_that_lost_its_hold_stops_and_leaves_the_session_to_the_new_holder() {
    let session = SessionId::from_random([7; 16]);
    let taken_over: Step = Box::new(move |store: &FakeStore| {
        store.with_session(session, |s| s.holder = Some("turn_newer".into()));
        tool_call("add", &json!({"a": 1, "b": 2}))(store)
    });
    let h = Harness::new(vec![taken_over, text("never asked")]);
    let outcome = h.engine.run_turn(h.request(&["add"])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Error);
    assert_eq!(outcome.error.map(|(code, _)| code).as_deref(), Some("turn_lease_lost"));
    // The call it made is paid for; nothing else is written, and the new holder keeps the session.
    assert_eq!(outcome.usage, usage(20, 2));
    assert_eq!(h.session(|s| s.usage), usage(20, 2));
    assert_eq!(h.store.event_types(h.session), ["turn.started", "message.user"]);
    assert_eq!(h.requests().len(), 1);
    assert_eq!(h.session(|s| s.holder.clone()).as_deref(), Some("turn_newer"));
    assert_eq!(h.session(|s| s.stop_reason), None);
}

#[tokio::test]
async fn a_session_held_by_a_live_turn_is_busy() {
    let h = Harness::new(vec![text("unused")]);
    h.store.with_session(h.session, |s| {
        s.holder = Some("turn_other".into());
        s.hold_until = Some(Timestamp::from_unix_millis(i64::MAX / 2));
    });
    let result = h.engine.run_turn(h.request(&[])).await;
    assert!(matches!(result, Err(TurnError::Busy)), "{result:?}");
    assert!(h.store.event_types(h.session).is_empty());
    assert!(h.requests().is_empty());
}

#[tokio::test]
async fn the_next_turn_reads_the_transcript_not_the_event_log() {
    let h = Harness::new(vec![tool_call("echo", &json!({"text": "hi"})), text("first"), text("second")]);
    let outcome = h.engine.run_turn(h.request(&["echo"])).await;
    assert!(outcome.is_ok());
    // The log is what clients read: emptying it takes nothing from the model's view.
    h.store.state().events.clear();
    let outcome = h.engine.run_turn(h.request(&[])).await;
    assert!(outcome.is_ok());
    let requests = h.requests();
    assert_eq!(requests.len(), 3);
    let third = &requests[2];
    // instructions, hello, the call, its result, "first", hello again.
    assert_eq!(third.len(), 6, "{third:?}");
    assert!(matches!(&third[2], ChatMessage::Assistant { tool_calls, .. } if tool_calls.len() == 1));
    assert!(matches!(&third[3], ChatMessage::Tool { tool_call_id, .. } if tool_call_id == "call_1"));
    assert!(matches!(&third[4], ChatMessage::Assistant { content: Some(c), .. } if c == "first"));
    // Saved at the end of each step: the tool step, then each answer.
    let version = h.store.state().transcripts.get(&h.session).map(|t| t.1);
    assert_eq!(version, Some(3));
}

#[tokio::test]
async fn a_transcript_saved_by_another_writer_mid_turn_stops_this_turn() {
    // Another writer saves while the model thinks (the hold was taken over).
    let step: Step = Box::new(|store: &FakeStore| {
        let session = SessionId::from_random([7; 16]);
        store.state().transcripts.insert(session, ("{\"messages\": []}".into(), 9, None));
        Ok(ModelReply { text: Some("late".into()), tool_calls: Vec::new(), usage: usage(1, 1) })
    });
    let h = Harness::new(vec![step]);
    let outcome = h.engine.run_turn(h.request(&[])).await.map(|o| o.error.map(|e| e.0));
    assert_eq!(outcome.ok().flatten().as_deref(), Some("turn_lease_lost"));
    let version = h.store.state().transcripts.get(&h.session).map(|t| t.1);
    assert_eq!(version, Some(9), "the other writer's transcript stays");
}

#[tokio::test]
async fn a_cancel_between_steps_stops_the_turn_with_no_further_model_call() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 1, "b": 2})), text("never asked")]);
    // The cancel lands after the tool's result, before the next step asks the model again.
    h.store.state().cancel_after = Some(EventType::ToolResult);
    let outcome = h.engine.run_turn(h.request(&["add"])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    assert_eq!(outcome.output_text, None);
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.usage, usage(20, 2));
    assert_eq!(h.requests().len(), 1);
    assert_eq!(
        h.store.event_types(h.session),
        ["turn.started", "message.user", "usage", "tool.call", "tool.result", "turn.ended"]
    );
    let ended = h.store.event(h.session, &EventType::TurnEnded).unwrap();
    assert_eq!(ended["stop_reason"], "cancelled");
    // Released, cancelled, and the cancel does not outlive the turn.
    assert_eq!(h.session(|s| s.holder.clone()), None);
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::Cancelled));
    assert_eq!(h.session(|s| s.cancelled_turn.clone()), None);
    assert_eq!(h.session(|s| s.usage), usage(20, 2));
}

#[tokio::test]
async fn a_cancel_during_a_model_call_records_its_spend_but_not_its_reply() {
    let session = SessionId::from_random([7; 16]);
    let cancel_then_answer: Step = Box::new(move |store: &FakeStore| {
        store.with_session(session, FakeSession::cancel);
        tool_call("add", &json!({"a": 1, "b": 2}))(store)
    });
    let h = Harness::new(vec![cancel_then_answer, text("never asked")]);
    let outcome = h.engine.run_turn(h.request(&["add"])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    assert_eq!(h.requests().len(), 1);
    // The call is paid for; its tool call is neither recorded nor run.
    assert_eq!(h.store.event_types(h.session), ["turn.started", "message.user", "usage", "turn.ended"]);
    assert_eq!(h.session(|s| s.usage), usage(20, 2));
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::Cancelled));
    assert_eq!(h.session(|s| s.holder.clone()), None);
}

#[tokio::test]
async fn a_cancel_after_the_answer_leaves_one_final_state_the_answer() {
    let h = Harness::new(vec![text("done")]);
    h.store.state().cancel_after = Some(EventType::AssistantMessage);
    let outcome = h.engine.run_turn(h.request(&[])).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(outcome.output_text.as_deref(), Some("done"));
    assert_eq!(h.store.event(h.session, &EventType::TurnEnded).unwrap()["stop_reason"], "end_turn");
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::EndTurn));
    assert_eq!(h.session(|s| (s.holder.clone(), s.cancelled_turn.clone())), (None, None));
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

#[tokio::test]
async fn a_tool_that_needs_approval_pauses_the_turn_and_an_approval_carries_the_same_turn_on() {
    let h = Harness::new(vec![
        calls(vec![
            call("call_a", "add", &json!({"a": 2, "b": 3})),
            call("call_e", "echo", &json!({"x": 1})),
        ]),
        text("it is 5"),
    ]);
    let outcome = h.engine.run_turn(h.hitl_request(&["add", "echo"], approvals(&["add"]))).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::RequiresAction);
    assert_eq!(outcome.actions.len(), 1);
    let action = outcome.actions[0].clone();
    assert_eq!((action.tool.as_str(), action.args.clone()), ("add", json!({"a": 2, "b": 3})));
    assert_eq!(action.status, ActionStatus::Pending);
    assert!(action.expires_at.is_some());
    // Paused: nothing ran, the session waits, the log says why.
    assert_eq!(
        h.store.event_types(h.session),
        ["turn.started", "message.user", "usage", "tool.call", "tool.call", "action.required"]
    );
    assert_eq!(
        h.store.event(h.session, &EventType::ActionRequired).unwrap()["action_id"],
        action.id.to_string()
    );
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::RequiresAction));
    // A new message waits for the actions.
    let busy = h.engine.run_turn(h.request(&[])).await;
    assert!(
        matches!(&busy, Err(TurnError::ActionsPending(ids)) if ids == &vec![action.id.clone()]),
        "{busy:?}"
    );

    h.store.settle(
        &action.id,
        ActionStatus::Resolved,
        Some(Answer::Approval { decision: Decision::Approve, reason: None }),
    );
    let continuation = h.continuation(&outcome.turn_id);
    let carried = h.engine.continue_paused(&continuation, None).await.unwrap().unwrap();
    assert_eq!(carried.turn_id, outcome.turn_id);
    assert_eq!(carried.stop_reason, StopReason::EndTurn);
    assert_eq!(carried.output_text.as_deref(), Some("it is 5"));
    // The whole turn's spend, both model calls.
    assert_eq!(carried.usage, usage(30, 7));
    assert_eq!(h.session(|s| s.usage), usage(30, 7));
    // Both calls ran, in the model's order, and the model saw both results.
    let requests = h.requests();
    assert_eq!(requests.len(), 2);
    let second = &requests[1];
    assert!(
        matches!(&second[3], ChatMessage::Tool { tool_call_id, content } if tool_call_id == "call_a" && content == r#"{"sum":5.0}"#)
    );
    assert!(matches!(&second[4], ChatMessage::Tool { tool_call_id, .. } if tool_call_id == "call_e"));
    let ended = h.store.event(h.session, &EventType::TurnEnded).unwrap();
    assert_eq!(ended["stop_reason"], "end_turn");
    assert_eq!(ended["usage"]["total_tokens"], 37);
    assert_eq!(h.session(|s| (s.holder.clone(), s.paused_at)), (None, None));
    // The same continuation again does nothing: no model call, no event.
    let events = h.store.event_types(h.session).len();
    assert!(h.engine.continue_paused(&continuation, None).await.unwrap().is_none());
    assert_eq!((h.requests().len(), h.store.event_types(h.session).len()), (2, events));
}

#[tokio::test]
async fn a_denied_tool_is_not_run_and_the_model_sees_the_denial() {
    let h =
        Harness::new(vec![calls(vec![call("call_a", "add", &json!({"a": 1, "b": 1}))]), text("ok, I won't")]);
    let outcome = h.engine.run_turn(h.hitl_request(&["add"], approvals(&["add"]))).await.unwrap();
    let id = outcome.actions[0].id.clone();
    h.store.settle(
        &id,
        ActionStatus::Resolved,
        Some(Answer::Approval { decision: Decision::Deny, reason: Some("too risky".into()) }),
    );
    let carried = h.engine.continue_paused(&h.continuation(&outcome.turn_id), None).await.unwrap().unwrap();
    assert_eq!(carried.stop_reason, StopReason::EndTurn);
    let result = h.store.event(h.session, &EventType::ToolResult).unwrap();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["output"], json!({"denied": true, "reason": "too risky"}));
    let requests = h.requests();
    assert!(matches!(&requests[1][3], ChatMessage::Tool { content, .. } if content.contains("too risky")));
}

#[tokio::test]
async fn questions_and_client_tools_pause_and_their_answers_reach_the_model_unchanged() {
    let h = Harness::new(vec![
        calls(vec![
            call("call_q", "ask_user", &json!({"question": "Which city?"})),
            call("call_c", "pick_color", &json!({"Palette": ["red"]})),
        ]),
        text("Paris, red"),
    ]);
    let hitl = HumanInTheLoop {
        questions_enabled: true,
        approval_timeout_minutes: 0,
        client_tools: vec![ClientTool {
            name: "pick_color".into(),
            description: "Lets the user pick a color.".into(),
            parameters: json!({"type": "object"}),
        }],
        ..HumanInTheLoop::default()
    };
    let outcome = h.engine.run_turn(h.hitl_request(&[], hitl)).await.unwrap();
    assert_eq!(outcome.actions.len(), 2);
    let question = outcome.actions.iter().find(|a| a.call_id == "call_q").unwrap().clone();
    let client = outcome.actions.iter().find(|a| a.call_id == "call_c").unwrap().clone();
    assert_eq!(question.question.as_deref(), Some("Which city?"));
    assert_eq!(question.expires_at, None, "0 = never expires");
    assert_eq!(client.args, json!({"Palette": ["red"]}));
    // One answered is not enough: the turn waits for both.
    let answers = json!({"City Name": "Paris", "camelCase": true});
    h.store.settle(&question.id, ActionStatus::Resolved, Some(Answer::Question { answers: answers.clone() }));
    h.store.settle(
        &client.id,
        ActionStatus::Resolved,
        Some(Answer::ClientTool { output: json!({"Chosen": "red"}) }),
    );
    let carried = h.engine.continue_paused(&h.continuation(&outcome.turn_id), None).await.unwrap().unwrap();
    assert_eq!(carried.output_text.as_deref(), Some("Paris, red"));
    let second = &h.requests()[1];
    let tool_content = |id: &str| {
        second.iter().find_map(|m| match m {
            ChatMessage::Tool { tool_call_id, content } if tool_call_id == id => Some(content.clone()),
            _ => None,
        })
    };
    assert_eq!(
        tool_content("call_q").map(|c| serde_json::from_str::<Value>(&c).ok()),
        Some(Some(json!({"answers": answers})))
    );
    assert_eq!(tool_content("call_c").as_deref(), Some(r#"{"Chosen":"red"}"#));
}

#[tokio::test]
async fn an_expired_action_carries_the_turn_on_with_that_result() {
    let h = Harness::new(vec![
        calls(vec![call("call_a", "add", &json!({"a": 1, "b": 1}))]),
        text("nobody answered"),
    ]);
    let outcome = h.engine.run_turn(h.hitl_request(&["add"], approvals(&["add"]))).await.unwrap();
    h.store.settle(&outcome.actions[0].id, ActionStatus::Expired, None);
    let carried = h.engine.continue_paused(&h.continuation(&outcome.turn_id), None).await.unwrap().unwrap();
    assert_eq!(carried.stop_reason, StopReason::EndTurn);
    let result = h.store.event(h.session, &EventType::ToolResult).unwrap();
    assert_eq!(result["output"]["expired"], true);
}

#[tokio::test]
async fn cancelling_a_paused_turn_ends_it_and_its_continuation_does_nothing() {
    let h =
        Harness::new(vec![calls(vec![call("call_a", "add", &json!({"a": 1, "b": 1}))]), text("never asked")]);
    let outcome = h.engine.run_turn(h.hitl_request(&["add"], approvals(&["add"]))).await.unwrap();
    let continuation = h.continuation(&outcome.turn_id);
    let cancelled =
        h.engine.cancel_paused(&h.project, &h.session, &outcome.turn_id, 6).await.unwrap().unwrap();
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0].status, ActionStatus::Cancelled);
    assert_eq!(
        h.session(|s| (s.holder.clone(), s.paused_at, s.stop_reason)),
        (None, None, Some(StopReason::Cancelled))
    );
    let ended = h.store.event(h.session, &EventType::TurnEnded).unwrap();
    assert_eq!(ended["stop_reason"], "cancelled");
    assert_eq!(ended["usage"]["total_tokens"], 22);
    assert!(h.engine.continue_paused(&continuation, None).await.unwrap().is_none());
    assert_eq!(h.requests().len(), 1);
    // Nothing is paused any more: a second cancel has nothing to do, a new turn runs.
    assert!(h.engine.cancel_paused(&h.project, &h.session, &outcome.turn_id, 7).await.unwrap().is_none());
}

#[tokio::test]
async fn a_tool_not_given_to_the_agent_needs_no_approval_it_is_an_unknown_tool() {
    let h = Harness::new(vec![calls(vec![call("call_a", "add", &json!({"a": 1, "b": 1}))]), text("sorry")]);
    let outcome = h.engine.run_turn(h.hitl_request(&["echo"], approvals(&["add"]))).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert!(outcome.actions.is_empty());
}

#[tokio::test]
async fn a_continuation_while_an_action_is_still_pending_does_nothing() {
    let h = Harness::new(vec![calls(vec![call("call_a", "add", &json!({"a": 1, "b": 1}))]), text("done")]);
    let outcome = h.engine.run_turn(h.hitl_request(&["add"], approvals(&["add"]))).await.unwrap();
    let continuation = h.continuation(&outcome.turn_id);
    assert!(h.engine.continue_paused(&continuation, None).await.unwrap().is_none());
    assert_eq!(h.requests().len(), 1);
    assert_eq!(h.session(|s| s.stop_reason), Some(StopReason::RequiresAction));
    // Once answered, the same continuation carries it on.
    h.store.settle(
        &outcome.actions[0].id,
        ActionStatus::Resolved,
        Some(Answer::Approval { decision: Decision::Approve, reason: None }),
    );
    let carried = h.engine.continue_paused(&continuation, None).await.unwrap();
    assert_eq!(carried.map(|o| o.stop_reason), Some(StopReason::EndTurn));
}

fn budget(max_cost_usd: f64, on_exceed: agentplane_domain::agent::BudgetAction) -> Option<SessionBudget> {
    Some(SessionBudget { max_cost_usd, on_exceed })
}

#[tokio::test]
async fn a_budget_already_spent_with_stop_ends_the_turn_before_any_model_call() {
    let h = Harness::new(vec![text("never asked")]);
    let mut request = h.request(&[]);
    request.budget = budget(0.0, agentplane_domain::agent::BudgetAction::Stop);
    let outcome = h.engine.run_turn(request).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::BudgetReached);
    assert_eq!(outcome.budget.map(|b| (b.paused, b.max_cost_usd)), Some((false, 0.0)));
    assert!(h.requests().is_empty());
    assert_eq!(
        h.store.event_types(h.session),
        ["turn.started", "message.user", "budget.reached", "turn.ended"]
    );
    assert_eq!(h.store.event(h.session, &EventType::TurnEnded).unwrap()["stop_reason"], "budget_reached");
    assert_eq!(h.session(|s| (s.holder.clone(), s.stop_reason)), (None, Some(StopReason::BudgetReached)));
}

#[tokio::test]
async fn a_budget_reached_mid_turn_pauses_it_and_raising_the_budget_carries_the_same_turn_on() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 1, "b": 2})), text("it is 3")]);
    let mut request = h.request(&["add"]);
    // The first call costs more than this: the second waits.
    request.budget = budget(0.000_001, agentplane_domain::agent::BudgetAction::Pause);
    let outcome = h.engine.run_turn(request).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::BudgetReached);
    let hit = outcome.budget.unwrap();
    assert!(hit.paused && hit.spent_usd > hit.max_cost_usd, "{hit:?}");
    assert_eq!(h.requests().len(), 1);
    assert_eq!(
        h.store.event_types(h.session),
        ["turn.started", "message.user", "usage", "tool.call", "tool.result", "budget.reached"]
    );
    assert!(h.session(|s| s.budget_paused));
    // A new message waits for the budget, and says what was spent of what.
    let refused = h.engine.run_turn(h.request(&[])).await;
    assert!(matches!(refused, Err(TurnError::BudgetPaused { .. })), "{refused:?}");
    // Raised: the same turn carries on from the model call it did not make.
    h.store.state().budgets.insert(
        h.session,
        SessionBudget { max_cost_usd: 1.0, on_exceed: agentplane_domain::agent::BudgetAction::Pause },
    );
    let carried = h.engine.continue_paused(&h.continuation(&outcome.turn_id), None).await.unwrap().unwrap();
    assert_eq!(
        (carried.turn_id.clone(), carried.stop_reason),
        (outcome.turn_id.clone(), StopReason::EndTurn)
    );
    assert_eq!(carried.output_text.as_deref(), Some("it is 3"));
    assert_eq!(carried.usage, usage(30, 7));
    assert_eq!(h.requests().len(), 2);
    assert!(!h.session(|s| s.budget_paused));
}

#[tokio::test]
async fn a_budget_that_stays_reached_pauses_the_carried_on_turn_again_without_a_model_call() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 1, "b": 2})), text("never asked")]);
    let mut request = h.request(&["add"]);
    request.budget = budget(0.000_001, agentplane_domain::agent::BudgetAction::Pause);
    let outcome = h.engine.run_turn(request).await.unwrap();
    // Carried on without a raise (a duplicate, a race): it pauses again at once.
    let again = h.engine.continue_paused(&h.continuation(&outcome.turn_id), None).await.unwrap().unwrap();
    assert_eq!(again.stop_reason, StopReason::BudgetReached);
    assert_eq!(h.requests().len(), 1);
    assert!(h.session(|s| s.budget_paused));
}

#[tokio::test]
async fn a_model_without_a_price_is_refused_where_a_budget_applies() {
    let h = Harness::new(vec![text("never asked")]);
    let mut request = h.request(&[]);
    request.config.model = "no-such-priced-model".into();
    request.budget = budget(5.0, agentplane_domain::agent::BudgetAction::Pause);
    let refused = h.engine.run_turn(request).await;
    assert!(
        matches!(&refused, Err(TurnError::ModelNotPriced { model }) if model == "no-such-priced-model"),
        "{refused:?}"
    );
    assert!(h.store.event_types(h.session).is_empty());
    // Without a budget it runs, its usage recorded as unpriced.
    let mut request = h.request(&[]);
    request.config.model = "no-such-priced-model".into();
    let outcome = h.engine.run_turn(request).await.unwrap();
    assert_eq!(outcome.unpriced, usage(10, 5));
}

#[tokio::test]
async fn a_project_without_endpoints_emits_no_webhook_events() {
    let h = Harness::new(vec![text("hi")]);
    h.engine.run_turn(h.request(&[])).await.unwrap();
    assert!(h.store.state().emitted.is_empty());
    assert_eq!(h.store.state().dispatched, 0);
}

#[tokio::test]
async fn a_turn_emits_session_idled_with_its_end_and_action_required_with_its_pause() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 2, "b": 3})), text("it is 5")]);
    h.store.state().webhooks = true;
    let paused = h.engine.run_turn(h.hitl_request(&["add"], approvals(&["add"]))).await.unwrap();
    assert_eq!(paused.stop_reason, StopReason::RequiresAction);
    {
        let state = h.store.state();
        // Only the pause's commit emitted (not the begin, not the call's own step).
        assert_eq!(state.emitted.len(), 1, "{:?}", state.emitted);
        let (kind, data) = &state.emitted[0];
        assert_eq!(kind, "action.required");
        assert_eq!(data["actions"][0]["id"], paused.actions[0].id.to_string());
        assert_eq!(data["turnId"], paused.turn_id);
        assert_eq!(data["sessionId"], h.session.to_string());
        assert_eq!(state.dispatched, 1);
    }
    h.store.settle(
        &paused.actions[0].id,
        ActionStatus::Resolved,
        Some(Answer::Approval { decision: Decision::Approve, reason: None }),
    );
    let carried = h.engine.continue_paused(&h.continuation(&paused.turn_id), None).await.unwrap().unwrap();
    assert_eq!(carried.stop_reason, StopReason::EndTurn);
    let state = h.store.state();
    let kinds: Vec<&str> = state.emitted.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["action.required", "session.idled"]);
    assert_eq!(state.emitted[1].1["stopReason"], "end_turn");
    assert_eq!(state.emitted[1].1["runtimeStatus"], "idle");
    assert_eq!(state.dispatched, 2);
}

#[tokio::test]
async fn cancelling_a_paused_turn_emits_session_idled_cancelled() {
    let h = Harness::new(vec![tool_call("add", &json!({"a": 2, "b": 3}))]);
    h.store.state().webhooks = true;
    let paused = h.engine.run_turn(h.hitl_request(&["add"], approvals(&["add"]))).await.unwrap();
    let cancelled = h.engine.cancel_paused(&h.project, &h.session, &paused.turn_id, 0).await.unwrap();
    assert!(cancelled.is_some());
    // A second cancel finds nothing paused and emits nothing.
    assert!(h.engine.cancel_paused(&h.project, &h.session, &paused.turn_id, 0).await.unwrap().is_none());
    let state = h.store.state();
    let kinds: Vec<&str> = state.emitted.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["action.required", "session.idled"]);
    assert_eq!(state.emitted[1].1["stopReason"], "cancelled");
}

#[test]
fn images_travel_as_url_parts_and_become_notes_in_later_requests() {
    use crate::model::{ContentPart, ImageUrl, UserContent, without_images};
    let content = UserContent::with_images("look".into(), &["https://s3/x?sig".into()]);
    let wire = serde_json::to_value(ChatMessage::User { content: content.clone() }).unwrap_or_default();
    assert_eq!(
        wire,
        serde_json::json!({"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://s3/x?sig"}},
        ]})
    );
    assert_eq!(UserContent::with_images("plain".into(), &[]), UserContent::Text("plain".into()));
    let later = without_images(vec![ChatMessage::User { content }]);
    let ChatMessage::User { content: UserContent::Parts(parts) } = &later[0] else {
        panic!("{later:?}");
    };
    assert!(!parts.iter().any(|p| matches!(p, ContentPart::ImageUrl { image_url: ImageUrl { .. } })));
    assert_eq!(parts.len(), 2);
    // A stored text message reads back as before.
    let old: ChatMessage = serde_json::from_str(r#"{"role":"user","content":"hi"}"#)
        .unwrap_or(ChatMessage::System { content: String::new() });
    assert!(matches!(&old, ChatMessage::User { content } if content == "hi"));
}
