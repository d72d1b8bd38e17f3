//! The typed payloads of the session event log, serialized exactly as the event's `data`.
//!
//! A release reads what later releases write: an event type it does not know, or data that does
//! not have its type's shape (cut down to a `preview` by the 16 KB bound, written before a field
//! existed), is [`EventPayload::Unknown`], kept verbatim, so a page never fails on it and it
//! serializes back unchanged. Fields a later release adds to a known type are kept too (`extra`).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::EventType;
use crate::agent::Channel;
use crate::ids::AgentId;
use crate::session::StopReason;

fn is_false(value: &bool) -> bool {
    !*value
}

/// `turn.started`: which agent config the turn runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnStarted {
    pub agent_id: AgentId,
    pub channel: Channel,
    /// The published version (`None` on the draft channel).
    pub version: Option<u32>,
    pub model: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `message.user` and `message.assistant`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageText {
    pub text: String,
    /// Set when the text was cut to keep the event within 16 KB.
    #[serde(default, rename = "_truncated", skip_serializing_if = "is_false")]
    pub truncated: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl MessageText {
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into(), truncated: false, extra: Map::new() }
    }
}

/// `usage`: one model call's tokens and cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageRecorded {
    pub step: u32,
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// 0 when the model has no price (`priced: false`), never a silent $0 spend.
    pub cost_usd: f64,
    pub priced: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `tool.call`: a call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub step: u32,
    pub call_id: String,
    pub name: String,
    /// The arguments as JSON, or the model's text when it was not JSON.
    pub arguments: Value,
    /// The arguments exactly as the model wrote them.
    pub arguments_text: String,
    /// The text the model wrote along with its calls (on the step's first call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_text: Option<String>,
    #[serde(default, rename = "_truncated", skip_serializing_if = "is_false")]
    pub truncated: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `tool.result`: what a tool answered (or the error the model is told about).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub step: u32,
    pub call_id: String,
    pub name: String,
    pub output: Value,
    pub is_error: bool,
    #[serde(default, rename = "_truncated", skip_serializing_if = "is_false")]
    pub truncated: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The token totals of a turn in `turn.ended`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// The part of the tokens spent on models with no price.
    pub unpriced_input_tokens: u64,
    pub unpriced_output_tokens: u64,
}

/// `turn.ended`: why the turn stopped and what it spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEnded {
    pub stop_reason: StopReason,
    /// Which limit stopped it (`timeout`, `max_steps`), for `stop_reason: limit`.
    pub limit: Option<String>,
    pub usage: TurnUsage,
    pub cost_usd: f64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `error`: why a turn failed, as a stable code and a message safe to show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnFailure {
    pub code: String,
    pub message: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `action.required`: a turn paused for this action until someone answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionRequired {
    pub action_id: String,
    #[serde(rename = "type")]
    pub kind: crate::action::ActionType,
    pub tool: String,
    pub call_id: String,
    /// The call's arguments exactly as the model gave them.
    pub args: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// Unix seconds, as every client time; `null`: never expires.
    pub expires_at: Option<i64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ActionRequired {
    pub fn of(action: &crate::action::Action) -> Self {
        Self {
            action_id: action.id.to_string(),
            kind: action.kind,
            tool: action.tool.clone(),
            call_id: action.call_id.clone(),
            args: action.args.clone(),
            question: action.question.clone(),
            expires_at: action.expires_at.map(|t| t.unix_seconds()),
            extra: Map::new(),
        }
    }
}

/// `budget.reached`: the session's spend reached its budget before a model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetReached {
    pub spent_usd: f64,
    pub max_cost_usd: f64,
    /// `pause`: the turn waits (raise the budget to carry it on); `stop`: it ended.
    pub on_exceed: crate::agent::BudgetAction,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `turn.superseded`: the turns `turn_ids` (their messages, calls and answer) are replaced by
/// the turn this event belongs to: `regenerate` answers the same user message again, `edit`
/// continues from the edited message `event_id`. Nothing is deleted; the events stay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnSuperseded {
    pub turn_ids: Vec<String>,
    pub reason: SupersedeReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<u64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SupersedeReason {
    Regenerate,
    Edit,
}

/// An event's payload: its type and its data, typed.
#[derive(Debug, Clone, PartialEq)]
pub enum EventPayload {
    TurnStarted(TurnStarted),
    UserMessage(MessageText),
    AssistantMessage(MessageText),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
    Usage(UsageRecorded),
    TurnEnded(TurnEnded),
    Error(TurnFailure),
    ActionRequired(ActionRequired),
    BudgetReached(BudgetReached),
    TurnSuperseded(TurnSuperseded),
    /// A type this release does not know, or data without its type's shape: kept verbatim.
    Unknown {
        kind: String,
        data: Value,
    },
}

fn typed<T: DeserializeOwned>(data: &Value, wrap: fn(T) -> EventPayload) -> Option<EventPayload> {
    serde_json::from_value(data.clone()).ok().map(wrap)
}

impl EventPayload {
    /// Reads an event's type and data; never fails (see [`EventPayload::Unknown`]).
    pub fn from_parts(kind: &EventType, data: &Value) -> Self {
        let known = match kind {
            EventType::TurnStarted => typed(data, Self::TurnStarted),
            EventType::UserMessage => typed(data, Self::UserMessage),
            EventType::AssistantMessage => typed(data, Self::AssistantMessage),
            EventType::ToolCall => typed(data, Self::ToolCall),
            EventType::ToolResult => typed(data, Self::ToolResult),
            EventType::Usage => typed(data, Self::Usage),
            EventType::TurnEnded => typed(data, Self::TurnEnded),
            EventType::Error => typed(data, Self::Error),
            EventType::ActionRequired => typed(data, Self::ActionRequired),
            EventType::BudgetReached => typed(data, Self::BudgetReached),
            EventType::TurnSuperseded => typed(data, Self::TurnSuperseded),
            EventType::Unknown(_) => None,
        };
        known.unwrap_or_else(|| Self::Unknown { kind: kind.as_str().to_owned(), data: data.clone() })
    }

    pub fn kind(&self) -> EventType {
        match self {
            Self::TurnStarted(_) => EventType::TurnStarted,
            Self::UserMessage(_) => EventType::UserMessage,
            Self::AssistantMessage(_) => EventType::AssistantMessage,
            Self::ToolCall(_) => EventType::ToolCall,
            Self::ToolResult(_) => EventType::ToolResult,
            Self::Usage(_) => EventType::Usage,
            Self::TurnEnded(_) => EventType::TurnEnded,
            Self::Error(_) => EventType::Error,
            Self::ActionRequired(_) => EventType::ActionRequired,
            Self::BudgetReached(_) => EventType::BudgetReached,
            Self::TurnSuperseded(_) => EventType::TurnSuperseded,
            Self::Unknown { kind, .. } => EventType::from(kind.clone()),
        }
    }

    /// The event's `data`, as stored and served.
    pub fn data(&self) -> Value {
        let data = match self {
            Self::TurnStarted(p) => serde_json::to_value(p),
            Self::UserMessage(p) | Self::AssistantMessage(p) => serde_json::to_value(p),
            Self::ToolCall(p) => serde_json::to_value(p),
            Self::ToolResult(p) => serde_json::to_value(p),
            Self::Usage(p) => serde_json::to_value(p),
            Self::TurnEnded(p) => serde_json::to_value(p),
            Self::Error(p) => serde_json::to_value(p),
            Self::ActionRequired(p) => serde_json::to_value(p),
            Self::BudgetReached(p) => serde_json::to_value(p),
            Self::TurnSuperseded(p) => serde_json::to_value(p),
            Self::Unknown { data, .. } => return data.clone(),
        };
        // These structs hold only strings, numbers and JSON values: serializing cannot fail,
        // but a failure must not panic either.
        data.unwrap_or(Value::Null)
    }
}

/// `{"type": …, "data": …}`, the shape an event carries its payload in.
#[derive(Serialize, Deserialize)]
struct Parts {
    #[serde(rename = "type")]
    kind: EventType,
    data: Value,
}

impl Serialize for EventPayload {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Parts { kind: self.kind(), data: self.data() }.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for EventPayload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let parts = Parts::deserialize(deserializer)?;
        Ok(Self::from_parts(&parts.kind, &parts.data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(kind: EventType, data: Value) -> EventPayload {
        let payload = EventPayload::from_parts(&kind, &data);
        let name = kind.as_str().to_owned();
        assert_eq!((payload.kind(), payload.data()), (kind, data), "{name} serializes back as it was read");
        payload
    }

    #[test]
    fn each_known_type_reads_typed_and_serializes_back_exactly() {
        let agent = AgentId::from_random([3; 16]);
        let started = round_trip(
            EventType::TurnStarted,
            json!({"agent_id": agent, "channel": "draft", "version": null, "model": "gpt-4o"}),
        );
        assert!(matches!(started, EventPayload::TurnStarted(TurnStarted { version: None, .. })));
        let user = round_trip(EventType::UserMessage, json!({"text": "hi"}));
        assert_eq!(user, EventPayload::UserMessage(MessageText::new("hi")));
        round_trip(EventType::AssistantMessage, json!({"text": "hello"}));
        let usage = round_trip(
            EventType::Usage,
            json!({"step": 1, "model": "m", "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.0, "priced": false}),
        );
        assert!(matches!(usage, EventPayload::Usage(UsageRecorded { priced: false, input_tokens: 10, .. })));
        let call = round_trip(
            EventType::ToolCall,
            json!({"step": 1, "call_id": "c1", "name": "add", "arguments": {"a": 1}, "arguments_text": "{\"a\":1}", "assistant_text": "let me add"}),
        );
        assert!(matches!(call, EventPayload::ToolCall(ToolCall { assistant_text: Some(_), .. })));
        round_trip(
            EventType::ToolCall,
            json!({"step": 2, "call_id": "c2", "name": "echo", "arguments": "not json", "arguments_text": "not json"}),
        );
        round_trip(
            EventType::ToolResult,
            json!({"step": 1, "call_id": "c1", "name": "add", "output": {"sum": 3.0}, "is_error": false}),
        );
        let ended = round_trip(
            EventType::TurnEnded,
            json!({"stop_reason": "limit", "limit": "max_steps", "cost_usd": 0.25, "usage": {
                "input_tokens": 3, "output_tokens": 4, "total_tokens": 7,
                "unpriced_input_tokens": 0, "unpriced_output_tokens": 0}}),
        );
        assert!(matches!(ended, EventPayload::TurnEnded(TurnEnded { stop_reason: StopReason::Limit, .. })));
        round_trip(EventType::Error, json!({"code": "model_timeout", "message": "the model call timed out"}));
    }

    #[test]
    fn typed_payloads_serialize_to_the_json_the_log_has_always_held() {
        let payload = EventPayload::ToolResult(ToolResult {
            step: 2,
            call_id: "c".into(),
            name: "echo".into(),
            output: json!("error: nope"),
            is_error: true,
            truncated: false,
            extra: Map::new(),
        });
        assert_eq!(
            payload.data(),
            json!({"step": 2, "call_id": "c", "name": "echo", "output": "error: nope", "is_error": true})
        );
        assert_eq!(serde_json::to_value(&payload).unwrap()["type"], "tool.result");
        let ended = EventPayload::TurnEnded(TurnEnded {
            stop_reason: StopReason::EndTurn,
            limit: None,
            usage: TurnUsage {
                input_tokens: 1,
                output_tokens: 2,
                total_tokens: 3,
                unpriced_input_tokens: 0,
                unpriced_output_tokens: 0,
            },
            cost_usd: 0.5,
            extra: Map::new(),
        });
        assert_eq!(ended.data()["limit"], Value::Null, "`limit` is written as null, as before");
        assert_eq!(ended.data()["stop_reason"], "end_turn");
    }

    #[test]
    fn an_event_type_from_a_newer_release_is_kept_verbatim_and_round_trips() {
        let data = json!({"approval": {"id": "act_1"}, "nested": [1, 2]});
        let payload = round_trip(EventType::from("action.requested".to_owned()), data.clone());
        assert_eq!(payload, EventPayload::Unknown { kind: "action.requested".into(), data: data.clone() });
        let wire = serde_json::to_value(&payload).unwrap();
        assert_eq!(wire, json!({"type": "action.requested", "data": data}));
        let back: EventPayload = serde_json::from_value(wire).unwrap();
        assert_eq!(back, payload);
    }

    #[test]
    fn data_without_its_types_shape_is_kept_verbatim_instead_of_failing() {
        // What the 16 KB bound leaves of an object it cannot shorten.
        let preview = json!({"_truncated": true, "preview": "{\"step\":1,"});
        let payload = round_trip(EventType::ToolResult, preview.clone());
        assert_eq!(payload, EventPayload::Unknown { kind: "tool.result".into(), data: preview });
    }

    #[test]
    fn fields_a_newer_release_adds_and_the_truncation_mark_survive_a_round_trip() {
        let data = json!({"text": "cut", "_truncated": true, "language": "en"});
        let payload = round_trip(EventType::AssistantMessage, data);
        let EventPayload::AssistantMessage(message) = payload else { panic!("typed") };
        assert!(message.truncated);
        assert_eq!(message.extra["language"], "en");
    }
}
