//! The turn loop over in-memory ports: a fake session store and event log, and a scripted model
//! that can change the store while it "thinks" (delete the session, take the turn over).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use agentplane_domain::agent::{Channel, VersionedConfig};
use agentplane_domain::event::{Event, EventType, NewEvent};
use agentplane_domain::ids::AgentId;
use agentplane_domain::pricing::{PriceTable, Usage};
use agentplane_domain::session::StopReason;
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{TurnError, TurnRequest};
use crate::model::{ChatMessage, ModelError, ModelReply, ToolDefinition, WireFunction, WireToolCall};
use crate::ports::{
    ChatModel, EventLog, PortError, SessionTurns, StoredTranscript, TranscriptStore, TurnHold,
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
    transcripts: HashMap<SessionId, (String, u64)>,
    /// Records a cancel right after an event of this type is appended (between two checks).
    cancel_after: Option<EventType>,
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
}

impl SessionTurns for FakeStore {
    async fn begin_turn(
        &self,
        _project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
        _agent: &AgentId,
        _channel: Channel,
        now: Timestamp,
        hold_until: Timestamp,
    ) -> Result<(), PortError> {
        let mut state = self.state();
        let session = state.sessions.get_mut(session).filter(|s| !s.deleted).ok_or(PortError::NotFound)?;
        if session.holder.is_some() && session.hold_until.is_some_and(|until| until >= now) {
            return Err(PortError::Conflict);
        }
        session.holder = Some(turn_id.to_owned());
        session.hold_until = Some(hold_until);
        Ok(())
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

    async fn end_turn(
        &self,
        _project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
        stop_reason: StopReason,
        _now: Timestamp,
    ) -> Result<(), PortError> {
        let mut state = self.state();
        let session = state.sessions.get_mut(session).ok_or(PortError::NotFound)?;
        if session.holder.as_deref() != Some(turn_id) {
            return Err(PortError::Conflict);
        }
        session.holder = None;
        session.hold_until = None;
        session.cancelled_turn = None;
        session.stop_reason = Some(stop_reason);
        Ok(())
    }
}

impl EventLog for FakeStore {
    async fn append_events(
        &self,
        session: &SessionId,
        events: Vec<NewEvent>,
        now: Timestamp,
        _retention_days: i64,
        _from: Option<u64>,
    ) -> Result<Vec<Event>, PortError> {
        let mut state = self.state();
        let cancel_after = state.cancel_after.clone();
        let log = state.events.entry(*session).or_default();
        let mut out = Vec::new();
        for event in events {
            let event = Event {
                session_id: *session,
                seq: log.len() as u64 + 1,
                kind: event.kind,
                turn_id: event.turn_id,
                data: event.data,
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
        Ok(out)
    }
}

impl TranscriptStore for FakeStore {
    async fn load_transcript(
        &self,
        _project: &ProjectId,
        session: &SessionId,
    ) -> Result<Option<StoredTranscript>, PortError> {
        Ok(self
            .state()
            .transcripts
            .get(session)
            .map(|(body, version)| StoredTranscript { body: body.clone(), version: *version }))
    }

    async fn save_transcript(
        &self,
        _project: &ProjectId,
        session: &SessionId,
        body: &str,
        expected: u64,
        _writer: &str,
    ) -> Result<u64, PortError> {
        let mut state = self.state();
        let current = state.transcripts.get(session).map_or(0, |(_, v)| *v);
        if current != expected {
            return Err(PortError::Conflict);
        }
        state.transcripts.insert(*session, (body.to_owned(), expected + 1));
        Ok(expected + 1)
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
            },
            input: "hello".into(),
            deadline: Instant::now() + Duration::from_secs(60),
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
    let version = h.store.state().transcripts.get(&h.session).map(|(_, v)| *v);
    assert_eq!(version, Some(3));
}

#[tokio::test]
async fn a_transcript_saved_by_another_writer_mid_turn_stops_this_turn() {
    // Another writer saves while the model thinks (the hold was taken over).
    let step: Step = Box::new(|store: &FakeStore| {
        let session = SessionId::from_random([7; 16]);
        store.state().transcripts.insert(session, ("{\"messages\": []}".into(), 9));
        Ok(ModelReply { text: Some("late".into()), tool_calls: Vec::new(), usage: usage(1, 1) })
    });
    let h = Harness::new(vec![step]);
    let outcome = h.engine.run_turn(h.request(&[])).await.map(|o| o.error.map(|e| e.0));
    assert_eq!(outcome.ok().flatten().as_deref(), Some("turn_lease_lost"));
    let version = h.store.state().transcripts.get(&h.session).map(|(_, v)| *v);
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
