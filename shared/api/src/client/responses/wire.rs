//! The Responses wire: the bodies the three turn routes read, as the document describes them,
//! and the Response object they answer (`id` is `resp_{session_id}`). The bodies are read by
//! `validation` (the order of its checks decides which error a bad body meets, and `POST
//! /responses` keeps the older `{"error": "…"}` shape for `agent`); a test holds the structs
//! here to what it accepts.

use std::collections::BTreeMap;

use agentplane_domain::SessionId;
use agentplane_domain::metadata::Metadata;
use agentplane_domain::session::StopReason;
use agentplane_engine::TurnOutcome;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::output::OutputItem;
use crate::envelope::{ErrorEnvelope, LegacyError};

/// A part of a user message. `input_image` and `input_file` parts name a ready file of the
/// turn's session by `file_id`, or (`input_file` only) carry the file itself as `file_data`, a
/// base64 data URL, with its `filename`; they are refused (400) when the running version's
/// `config.attachments.enabled` is false, the file is not usable, or an image goes to a model
/// that reads none.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(dead_code)]
pub enum InputPart {
    InputText { text: String },
    Text { text: String },
    InputImage { file_id: Option<String> },
    InputFile { file_id: Option<String>, filename: Option<String>, file_data: Option<String> },
}

/// A part, or a bare string.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum InputContent {
    Text(String),
    Part(InputPart),
}

/// A user message's content: a string or a list of parts.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<InputContent>),
}

/// A message to the agent; only `user` messages can be sent.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct InputMessage {
    #[schema(pattern = "^user$")]
    role: String,
    /// `message`, where given.
    #[serde(rename = "type")]
    #[schema(nullable = false, pattern = "^message$")]
    kind: Option<String>,
    content: MessageContent,
}

/// One item of an `input` list.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum InputItem {
    Message(InputMessage),
    Content(InputContent),
}

/// `input`: a string, or a list of parts and user messages. Its text is at most 100000
/// characters and not blank.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum Input {
    Text(String),
    Items(Vec<InputItem>),
}

/// `POST /api/client/v1/responses` and `POST /api/client/v1/agents/responses`.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct CreateResponse {
    /// The agent's id: an agent of the caller's project.
    agent: String,
    input: Input,
    /// The agent's id when `agent` is absent; with `agent`, its id or its model.
    model: Option<String>,
    /// Continue this session (of the same project); absent or `null` starts a new one.
    session_id: Option<String>,
    /// `resp_{session_id}`: continue that session.
    previous_response_id: Option<String>,
    /// `true`: answer with the Responses streaming events (`text/event-stream`).
    stream: Option<bool>,
    /// Added to the agent's instructions for this turn.
    #[schema(max_length = 32000)]
    instructions: Option<String>,
    /// `function` tools the caller runs (`{type: "function", name, description?, parameters?}`).
    #[schema(value_type = Option<Vec<Object>>)]
    tools: Option<Vec<serde_json::Value>>,

    /// The new session's metadata: at most 16 string values.
    metadata: Option<BTreeMap<String, String>>,
    /// `true`: queue the turn as a background run and answer 202 at once (the agent's
    /// `config.execution.background_enabled` must be on, else 400 `background_not_enabled`).
    background: Option<bool>,
    /// A background run's end is reported here (http or https); else the agent's
    /// `default_callback_url`.
    #[schema(max_length = 2048)]
    callback_url: Option<String>,
}

/// `POST /api/client/v1/sessions/{session_id}/events/{event_id}/edit`: the message's new text.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct EditMessage {
    /// The edited message (text, or text message parts; no file parts).
    input: Input,
}

/// `POST /api/client/v1/sessions/{session_id}/messages`.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct CreateSessionMessage {
    /// The agent to ask; by default the one the session last ran (required while it has none).
    #[schema(nullable = false)]
    agent: Option<String>,
    input: Input,
    /// `true`: answer with the Responses streaming events (`text/event-stream`).
    stream: Option<bool>,
    /// Added to the agent's instructions for this turn.
    #[schema(max_length = 32000)]
    instructions: Option<String>,
    /// `function` tools the caller runs (`{type: "function", name, description?, parameters?}`).
    #[schema(value_type = Option<Vec<Object>>)]
    tools: Option<Vec<serde_json::Value>>,

    /// `true`: queue the turn as a background run and answer 202 at once (the agent's
    /// `config.execution.background_enabled` must be on, else 400 `background_not_enabled`).
    background: Option<bool>,
    /// A background run's end is reported here (http or https); else the agent's
    /// `default_callback_url`.
    #[schema(max_length = 2048)]
    callback_url: Option<String>,
}

/// The error body of `POST /responses` and `POST /agents/responses`: the standard envelope,
/// or `{"error": "…"}` for a missing or unknown `agent`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum ResponsesError {
    Envelope(ErrorEnvelope),
    Legacy(LegacyError),
}

/// `completed` for an answer; `incomplete` when a limit, a cancel, the budget or an error ended
/// the turn first; `requires_action` while it waits for a person; `in_progress` while it runs
/// (what `GET /responses/{response_id}` reads of a turn that has not stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = ResponseStatus)]
pub enum ResponseStatusName {
    Completed,
    RequiresAction,
    Incomplete,
    InProgress,
}

impl From<StopReason> for ResponseStatusName {
    fn from(stop: StopReason) -> Self {
        match stop {
            StopReason::EndTurn => Self::Completed,
            StopReason::RequiresAction => Self::RequiresAction,
            StopReason::Limit | StopReason::Cancelled | StopReason::BudgetReached | StopReason::Error => {
                Self::Incomplete
            }
        }
    }
}

/// Why the turn stopped: `completed` for a normal answer (the session's is `end_turn`);
/// `in_progress` while it has not stopped (a turn read back while it runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = ResponseStopReason)]
pub enum ResponseStopReason {
    Completed,
    RequiresAction,
    Limit,
    Cancelled,
    Error,
    BudgetReached,
    InProgress,
}

impl From<StopReason> for ResponseStopReason {
    fn from(stop: StopReason) -> Self {
        match stop {
            StopReason::EndTurn => Self::Completed,
            StopReason::RequiresAction => Self::RequiresAction,
            StopReason::Limit => Self::Limit,
            StopReason::Cancelled => Self::Cancelled,
            StopReason::Error => Self::Error,
            StopReason::BudgetReached => Self::BudgetReached,
        }
    }
}

/// The turn's measured usage.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResponseUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// Spend in USD on priced models.
    pub cost_usd: f64,
    /// Tokens of a model with no price: in the counts above, not in `cost_usd`.
    pub unpriced_input_tokens: u64,
    pub unpriced_output_tokens: u64,
    /// Always `{"cached_tokens": 0}` (what the OpenAI SDKs read).
    #[schema(value_type = Object)]
    pub input_tokens_details: serde_json::Value,
    /// Always `{"reasoning_tokens": 0}`.
    #[schema(value_type = Object)]
    pub output_tokens_details: serde_json::Value,
}

impl ResponseUsage {
    pub fn of(outcome: &TurnOutcome) -> Self {
        Self {
            input_tokens: outcome.usage.input_tokens,
            output_tokens: outcome.usage.output_tokens,
            total_tokens: outcome.usage.total_tokens(),
            cost_usd: outcome.cost_usd,
            unpriced_input_tokens: outcome.unpriced.input_tokens,
            unpriced_output_tokens: outcome.unpriced.output_tokens,
            input_tokens_details: serde_json::json!({"cached_tokens": 0}),
            output_tokens_details: serde_json::json!({"reasoning_tokens": 0}),
        }
    }
}

/// The agent that answered, and its version (`null` for the draft).
#[derive(Debug, Serialize, ToSchema)]
pub struct ResponseAgent {
    pub id: String,
    pub version: Option<u32>,
}

/// Why a turn ended in `error`: a stable code and a message safe to show.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResponseError {
    pub code: String,
    pub message: String,
}

/// The outcome of one agent turn.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Response)]
pub struct ResponseBody {
    /// `resp_{session_id}`.
    pub id: String,
    /// Always `response`.
    #[schema(value_type = String, pattern = "^response$")]
    pub object: &'static str,
    /// Unix seconds.
    pub created_at: i64,
    pub status: ResponseStatusName,
    pub stop_reason: ResponseStopReason,
    /// What the turn produced in this call: the agent's messages, the calls its own tools ran
    /// (`mcp_call`), the calls for the caller to run (`function_call`) and the approvals and
    /// questions it waits for (`mcp_approval_request`).
    pub output: Vec<OutputItem>,
    /// The answer's text (empty when there is none).
    pub output_text: String,
    pub usage: ResponseUsage,
    #[schema(value_type = String)]
    pub session_id: SessionId,
    pub turn_id: String,
    pub agent: ResponseAgent,
    pub model: String,
    pub metadata: BTreeMap<String, String>,
    /// Set when the turn ended in `error`.
    pub error: Option<ResponseError>,
    /// Present when the turn paused (`status: requires_action`): what it waits for. Answer each
    /// action with `POST /api/client/v1/sessions/{session_id}/actions/{id}`; the turn carries
    /// on by itself once none is pending (follow it on the event log).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub required_action: Option<RequiredAction>,
    /// Set when the session budget stopped the turn before a model call (`status:
    /// incomplete`, `stop_reason: budget_reached`).
    pub incomplete_details: Option<IncompleteDetails>,
    /// The instructions the request added for this turn (`null`: none).
    pub instructions: Option<String>,
    /// Always `true` (the model may call several tools in a step).
    pub parallel_tool_calls: bool,
    /// Always `auto`.
    #[schema(value_type = String, pattern = "^auto$")]
    pub tool_choice: &'static str,
    /// The function tools the request gave for this turn, as given.
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<serde_json::Value>,
    /// Always `null`: the agent fixes its sampling.
    #[schema(value_type = Option<f64>)]
    pub temperature: Option<f64>,
    /// Always `null`.
    #[schema(value_type = Option<f64>)]
    pub top_p: Option<f64>,
}

/// Why a turn is incomplete, when its budget says so.
#[derive(Debug, Serialize, ToSchema)]
pub struct IncompleteDetails {
    /// `budget_paused`: the turn waits; raise the session budget (PATCH the session) and it
    /// carries on. `budget_reached`: it ended (`on_exceed: stop`).
    #[schema(value_type = String, pattern = "^(budget_paused|budget_reached)$")]
    pub reason: &'static str,
    pub spent_usd: f64,
    pub max_cost_usd: f64,
}

/// What a paused turn waits for.
#[derive(Debug, Serialize, ToSchema)]
pub struct RequiredAction {
    /// Always `actions`.
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^actions$")]
    pub kind: &'static str,
    pub actions: Vec<RequiredActionItem>,
}

/// One action a paused turn waits for.
#[derive(Debug, Serialize, ToSchema)]
pub struct RequiredActionItem {
    /// `act_…`.
    pub id: String,
    /// `approval`, `question` or `client_tool`.
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^(approval|question|client_tool)$")]
    pub kind: agentplane_domain::action::ActionType,
    /// The tool the model called (`ask_user` for a question).
    pub tool: String,
    /// The call's arguments exactly as the model gave them.
    #[schema(value_type = Object)]
    pub args: serde_json::Value,
    /// The question, for `question`.
    pub question: Option<String>,
    /// Unix seconds; `null`: it never expires.
    pub expires_at: Option<i64>,
}

impl From<&agentplane_domain::action::Action> for RequiredActionItem {
    fn from(action: &agentplane_domain::action::Action) -> Self {
        Self {
            id: action.id.to_string(),
            kind: action.kind,
            tool: action.tool.clone(),
            args: action.args.clone(),
            question: action.question.clone(),
            expires_at: action.expires_at.map(|t| t.unix_seconds()),
        }
    }
}

pub struct Rendered<'a> {
    pub session_id: SessionId,
    /// The turn's items (from the events it committed in this call).
    pub output: Vec<OutputItem>,
    pub instructions: Option<&'a str>,
    pub tools: &'a [serde_json::Value],
    pub agent_id: String,
    pub version: Option<u32>,
    pub model: &'a str,
    pub metadata: &'a Metadata,
    pub created_at: i64,
}

impl ResponseBody {
    pub fn new(r: Rendered<'_>, outcome: &TurnOutcome) -> Self {
        let mut output = r.output;
        // An answer the events did not show (a watcher that missed it) still reads as one.
        if let Some(text) = &outcome.output_text
            && !output.iter().any(|item| item.text() == Some(text.as_str()))
        {
            output.push(OutputItem::message(&r.session_id, 0, text.clone()));
        }
        Self {
            id: format!("resp_{}", r.session_id),
            object: "response",
            created_at: r.created_at,
            status: outcome.stop_reason.into(),
            stop_reason: outcome.stop_reason.into(),
            output,
            output_text: outcome.output_text.clone().unwrap_or_default(),
            usage: ResponseUsage::of(outcome),
            session_id: r.session_id,
            turn_id: outcome.turn_id.clone(),
            agent: ResponseAgent { id: r.agent_id.clone(), version: r.version },
            model: r.model.to_owned(),
            metadata: r.metadata.as_map().clone(),
            error: outcome
                .error
                .as_ref()
                .map(|(code, message)| ResponseError { code: code.clone(), message: message.clone() }),
            required_action: (!outcome.actions.is_empty()).then(|| RequiredAction {
                kind: "actions",
                actions: outcome.actions.iter().map(RequiredActionItem::from).collect(),
            }),
            incomplete_details: outcome.budget.map(|hit| IncompleteDetails {
                reason: if hit.paused { "budget_paused" } else { "budget_reached" },
                spent_usd: hit.spent_usd,
                max_cost_usd: hit.max_cost_usd,
            }),
            instructions: r.instructions.map(str::to_owned),
            parallel_tool_calls: true,
            tool_choice: "auto",
            tools: r.tools.to_vec(),
            temperature: None,
            top_p: None,
        }
    }
}

impl ResponseBody {
    /// A turn read back from the session's log: its outcome so far rendered as [`Self::new`]
    /// renders a finished call's, `in_progress` (status and stop reason) while it still runs.
    pub fn from_turn(r: Rendered<'_>, outcome: &TurnOutcome, running: bool) -> Self {
        let mut body = Self::new(r, outcome);
        if running {
            body.status = ResponseStatusName::InProgress;
            body.stop_reason = ResponseStopReason::InProgress;
        }
        body
    }
}

#[cfg(test)]
mod tests {
    use agentplane_domain::agent::Attachments;
    use serde_json::{Value, json};

    use super::*;
    use crate::client::responses::validation::input_text;

    /// The documented `input` shapes are what `validation` reads, and back.
    #[test]
    fn the_documented_input_shapes_are_what_validation_reads() {
        for input in [
            json!("hi"),
            json!([{"type": "input_text", "text": "a"}, "b"]),
            json!([{"role": "user", "content": "x"}]),
            json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}, "y"]}]),
            json!([{"type": "text", "text": "t"}]),
        ] {
            assert!(input_text(Some(&input), &Attachments::default()).is_ok(), "{input}");
            let body =
                json!({"agent": "a", "input": input.clone(), "background": false, "metadata": {"k": "v"}});
            assert!(serde_json::from_value::<CreateResponse>(body).is_ok(), "{input}");
            assert!(serde_json::from_value::<CreateSessionMessage>(json!({"input": input})).is_ok());
        }
        for refused in [json!(5), json!([5]), json!([{"type": "nope"}])] {
            assert!(input_text(Some(&refused), &Attachments::default()).is_err(), "{refused}");
            let body = json!({"agent": "a", "input": refused.clone()});
            assert!(serde_json::from_value::<CreateResponse>(body).is_err(), "{refused}");
        }
    }

    #[test]
    fn the_stop_reason_reads_completed_for_an_answer() {
        let value =
            |stop: StopReason| serde_json::to_value(ResponseStopReason::from(stop)).unwrap_or_default();
        assert_eq!(value(StopReason::EndTurn), json!("completed"));
        assert_eq!(value(StopReason::BudgetReached), json!("budget_reached"));
        let status =
            |stop: StopReason| serde_json::to_value(ResponseStatusName::from(stop)).unwrap_or_default();
        assert_eq!(status(StopReason::Error), Value::from("incomplete"));
    }
}
