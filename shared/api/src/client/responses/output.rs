//! A turn's events as Responses output items, the way the OpenAI SDKs read them:
//! - the assistant's text: `message` (`msg_…`);
//! - a call a tool of the agent ran on the server: `mcp_call` (`mcp_…`, `server_label`
//!   `agentplane`), with its output: the SDKs show it and never run it themselves;
//! - a call the caller runs (a client tool, or a function tool of the request): `function_call`
//!   (`fc_…`), whose `call_id` is the action's id (`act_…`), answered with a
//!   `function_call_output` item of that `call_id`;
//! - an approval or a question the turn waits for: `mcp_approval_request` (its `id` the action's).
//!
//! An item's id is made of the session's id and its event's `seq`, so a turn reads the same ids
//! whether it is answered, streamed or retrieved, and `fc_{session}_{seq}` names its session.

use agentplane_domain::SessionId;
use agentplane_domain::action::ActionType;
use agentplane_domain::event::payload::ToolCall;
use agentplane_domain::event::{Event, EventPayload};
use serde::Serialize;
use utoipa::ToSchema;

/// What `server_label` reads on the calls the agent's own tools made.
pub const SERVER_LABEL: &str = "agentplane";

/// Text the agent answered.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OutputText {
    /// Always `output_text`.
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^output_text$")]
    pub kind: &'static str,
    pub text: String,
    /// Always empty.
    #[schema(value_type = Vec<Object>)]
    pub annotations: Vec<serde_json::Value>,
}

impl OutputText {
    pub fn new(text: String) -> Self {
        Self { kind: "output_text", text, annotations: Vec::new() }
    }
}

/// One item of a Response's `output`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    /// The agent's text as an assistant message.
    Message {
        /// `msg_…`.
        id: String,
        /// Always `assistant`.
        #[schema(value_type = String, pattern = "^assistant$")]
        role: &'static str,
        /// Always `completed`.
        #[schema(value_type = String, pattern = "^completed$")]
        status: &'static str,
        content: Vec<OutputText>,
    },
    /// A call for the caller to run; answer it with a `function_call_output` input item whose
    /// `call_id` is this one's.
    FunctionCall {
        /// `fc_…`.
        id: String,
        /// The action's id (`act_…`).
        call_id: String,
        name: String,
        /// The arguments exactly as the model wrote them (JSON text).
        arguments: String,
        /// Always `completed`.
        #[schema(value_type = String, pattern = "^completed$")]
        status: &'static str,
    },
    /// A call one of the agent's own tools ran on the server, with its output.
    McpCall {
        /// `mcp_…`.
        id: String,
        /// Always `agentplane`.
        #[schema(value_type = String, pattern = "^agentplane$")]
        server_label: &'static str,
        name: String,
        arguments: String,
        /// The tool's output (JSON text), when it did not fail.
        output: Option<String>,
        /// Why it failed, when it did.
        error: Option<String>,
        /// Always `completed`.
        #[schema(value_type = String, pattern = "^completed$")]
        status: &'static str,
    },
    /// An approval or a question the turn waits for; answer the action (`id`) with `POST
    /// /api/client/v1/sessions/{session_id}/actions/{id}`.
    McpApprovalRequest {
        /// The action's id (`act_…`).
        id: String,
        /// Always `agentplane`.
        #[schema(value_type = String, pattern = "^agentplane$")]
        server_label: &'static str,
        name: String,
        arguments: String,
    },
}

impl OutputItem {
    /// An assistant message of `text`, as the event `seq` of `session` wrote it.
    pub fn message(session: &SessionId, seq: u64, text: String) -> Self {
        Self::Message {
            id: format!("msg_{session}_{seq}"),
            role: "assistant",
            status: "completed",
            content: vec![OutputText::new(text)],
        }
    }

    /// Its text, for a message.
    pub fn text(&self) -> Option<&str> {
        match self {
            Self::Message { content, .. } => content.first().map(|c| c.text.as_str()),
            _ => None,
        }
    }
}

/// Builds the items of one turn from its events in the log's order. An item is added whole
/// once its last event is in (a server call with its result, a paused call with its action).
#[derive(Debug, Default)]
pub struct Items {
    session: Option<SessionId>,
    items: Vec<OutputItem>,
    /// Calls seen and not yet turned into an item: their event's seq and the call.
    calls: Vec<(u64, ToolCall)>,
}

impl Items {
    pub fn new(session: SessionId) -> Self {
        Self { session: Some(session), ..Self::default() }
    }

    /// Reads `event`; returns how many items it completed (the last ones of [`Self::items`]).
    pub fn push(&mut self, event: &Event) -> usize {
        let Some(session) = self.session else { return 0 };
        let before = self.items.len();
        let uuid = session;
        match event.payload() {
            // A streamed answer that broke off: the stream showed it, the Response does not.
            EventPayload::AssistantMessage(message) if message.extra.contains_key("interrupted") => {}
            EventPayload::AssistantMessage(message) if !message.text.is_empty() => {
                self.items.push(OutputItem::message(&session, event.seq, message.text));
            }
            EventPayload::ToolCall(call) => {
                if let Some(text) = call.assistant_text.clone().filter(|t| !t.is_empty()) {
                    self.items.push(OutputItem::message(&session, event.seq, text));
                }
                self.calls.push((event.seq, call));
            }
            EventPayload::ToolResult(result) => {
                if let Some(at) = self.calls.iter().position(|(_, c)| c.call_id == result.call_id) {
                    let (seq, call) = self.calls.remove(at);
                    let text = match &result.output {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    let (output, error) =
                        if result.is_error { (None, Some(text)) } else { (Some(text), None) };
                    self.items.push(OutputItem::McpCall {
                        id: format!("mcp_{uuid}_{seq}"),
                        server_label: SERVER_LABEL,
                        name: call.name,
                        arguments: call.arguments_text,
                        output,
                        error,
                        status: "completed",
                    });
                }
            }
            EventPayload::ActionRequired(action) => {
                if let Some(at) = self.calls.iter().position(|(_, c)| c.call_id == action.call_id) {
                    let (seq, call) = self.calls.remove(at);
                    self.items.push(match action.kind {
                        ActionType::ClientTool => OutputItem::FunctionCall {
                            id: format!("fc_{uuid}_{seq}"),
                            call_id: action.action_id,
                            name: call.name,
                            arguments: call.arguments_text,
                            status: "completed",
                        },
                        ActionType::Approval | ActionType::Question => OutputItem::McpApprovalRequest {
                            id: action.action_id,
                            server_label: SERVER_LABEL,
                            name: call.name,
                            arguments: call.arguments_text,
                        },
                    });
                }
            }
            _ => {}
        }
        self.items.len() - before
    }

    pub fn items(&self) -> &[OutputItem] {
        &self.items
    }

    pub fn into_items(self) -> Vec<OutputItem> {
        self.items
    }
}

#[cfg(test)]
mod tests {
    use agentplane_domain::event::NewEvent;
    use agentplane_domain::event::payload::{ActionRequired, MessageText, ToolResult};
    use serde_json::{Map, json};

    use super::*;

    fn event(session: SessionId, seq: u64, payload: &EventPayload) -> Event {
        let new = NewEvent::from_payload(payload, Some("turn_1".into()));
        Event {
            session_id: session,
            seq,
            kind: new.kind,
            turn_id: new.turn_id,
            data: new.data,
            created_at: agentplane_domain::Timestamp::from_unix_seconds(0),
        }
    }

    fn call(id: &str, name: &str, text: Option<&str>) -> EventPayload {
        EventPayload::ToolCall(ToolCall {
            step: 1,
            call_id: id.into(),
            name: name.into(),
            arguments: json!({"a": 1}),
            arguments_text: "{\"a\":1}".into(),
            assistant_text: text.map(str::to_owned),
            truncated: false,
            extra: Map::new(),
        })
    }

    #[test]
    fn a_turn_reads_as_messages_server_calls_and_caller_calls_with_stable_ids() {
        let session = SessionId::from_random([7; 16]);
        let mut items = Items::new(session);
        assert_eq!(items.push(&event(session, 3, &call("c1", "add", Some("Let me add.")))), 1);
        let result = EventPayload::ToolResult(ToolResult {
            step: 1,
            call_id: "c1".into(),
            name: "add".into(),
            output: json!(5),
            is_error: false,
            truncated: false,
            extra: Map::new(),
        });
        assert_eq!(items.push(&event(session, 4, &result)), 1);
        assert_eq!(items.push(&event(session, 5, &call("c2", "lookup", None))), 0);
        let required = EventPayload::ActionRequired(ActionRequired {
            action_id: "act_1".into(),
            kind: ActionType::ClientTool,
            tool: "lookup".into(),
            call_id: "c2".into(),
            args: json!({}),
            question: None,
            expires_at: None,
            extra: Map::new(),
        });
        assert_eq!(items.push(&event(session, 6, &required)), 1);
        let answer = EventPayload::AssistantMessage(MessageText::new("5"));
        assert_eq!(items.push(&event(session, 9, &answer)), 1);
        let value = serde_json::to_value(items.items()).unwrap_or_default();
        let uuid = session.to_string();
        assert_eq!(value[0]["type"], "message");
        assert_eq!(value[0]["id"], format!("msg_{uuid}_3"));
        assert_eq!(value[1]["type"], "mcp_call");
        assert_eq!(value[1]["output"], "5");
        assert_eq!(value[2]["type"], "function_call");
        assert_eq!(value[2]["call_id"], "act_1");
        assert_eq!(value[2]["id"], format!("fc_{uuid}_5"));
        assert_eq!(value[3]["content"][0]["text"], "5");
    }
}
