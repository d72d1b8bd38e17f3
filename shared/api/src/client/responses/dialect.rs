//! What the OpenAI dialect decides about a turn request before it runs: which session it
//! continues, whether `model` names this agent, whether `input` answers paused calls, and the
//! instructions and function tools it lays over the running config.

use agentplane_domain::SessionId;
use agentplane_engine::admission::Admitted;
use serde_json::{Map, Value};

use super::validation::InputExtras;
use crate::client::error::ClientError;

/// The session a `POST /responses` continues: `previous_response_id` (`resp_{session}`),
/// `session_id`, or the session the ids of the history items in `input` name; `None`: a new
/// one. An id that names no session is a 404, never a silent new session.
pub(super) fn target_session(
    body: &Map<String, Value>,
    extras: &InputExtras,
) -> Result<Option<SessionId>, ClientError> {
    let previous = match body.get("previous_response_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(
            text.strip_prefix("resp_")
                .and_then(|id| id.parse::<SessionId>().ok())
                .ok_or(ClientError::SessionNotFound)?,
        ),
        Some(_) => {
            return Err(agentplane_domain::ValidationError::new(
                "previous_response_id",
                "`previous_response_id` must be a string",
            )
            .into());
        }
    };
    let session = match body.get("session_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => {
            Some(text.parse::<SessionId>().map_err(|_| ClientError::SessionNotFound)?)
        }
        Some(_) => {
            return Err(agentplane_domain::ValidationError::new(
                "session_id",
                "`session_id` must be a string",
            )
            .into());
        }
    };
    match (previous, session) {
        (Some(a), Some(b)) if a != b => Err(agentplane_domain::ValidationError::new(
            "previous_response_id",
            "`previous_response_id` and `session_id` name different sessions",
        )
        .into()),
        (Some(id), _) | (None, Some(id)) => Ok(Some(id)),
        (None, None) => match &extras.history {
            None => Ok(None),
            Some((_, Some(id))) => Ok(Some(*id)),
            // A conversation from elsewhere: replayed into a new session.
            Some((_, None)) => Ok(None),
        },
    }
}

/// Whether `input` holds `function_call_output` items (answers, not a message).
pub(super) fn answers_calls(input: Option<&Value>) -> bool {
    input.and_then(Value::as_array).is_some_and(|items| {
        items.iter().any(|item| item.get("type").and_then(Value::as_str) == Some("function_call_output"))
    })
}

/// `model`, with `agent` given, names that agent (its id) or the model it runs; another is
/// refused, since a turn runs the agent's own model.
pub(super) fn check_model(body: &Map<String, Value>, admitted: &Admitted) -> Result<(), ClientError> {
    if body.get("agent").is_none_or(Value::is_null) {
        return Ok(());
    }
    match body.get("model") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(model))
            if *model == admitted.agent.id.to_string() || *model == admitted.config.model =>
        {
            Ok(())
        }
        Some(_) => Err(agentplane_domain::ValidationError::new(
            "model",
            "`model` must name this agent (its id) or the model it runs: a turn runs the agent's own model",
        )
        .into()),
    }
}

/// What the OpenAI dialect adds to one turn: instructions and function tools for this turn
/// (laid over the running config, so a pause saves them with the turn), and whether the answer
/// streams.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dialect {
    pub instructions: Option<String>,
    pub tools: Vec<Value>,
    pub stream: bool,
}

/// The most characters a request's instructions add.
const MAX_INSTRUCTIONS_CHARS: usize = 32_000;

impl Dialect {
    /// Reads `instructions`, `tools` and `stream` (and the instruction messages of `input`),
    /// and lays them over `admitted`'s config.
    pub(super) fn read(
        body: &Map<String, Value>,
        extras: &InputExtras,
        admitted: &mut Admitted,
    ) -> Result<Self, ClientError> {
        let invalid = |param: &str, message: &str| agentplane_domain::ValidationError::new(param, message);
        let stream = match body.get("stream") {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(Value::Bool(true)) => true,
            Some(_) => return Err(invalid("stream", "`stream` must be a boolean").into()),
        };
        let mut added: Vec<String> = Vec::new();
        match body.get("instructions") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => added.push(text.clone()),
            Some(_) => return Err(invalid("instructions", "`instructions` must be a string").into()),
        }
        added.extend(extras.system.iter().cloned());
        added.retain(|text| !text.trim().is_empty());
        let instructions = (!added.is_empty()).then(|| added.join("\n\n"));
        if let Some(text) = &instructions {
            if text.chars().count() > MAX_INSTRUCTIONS_CHARS {
                return Err(ClientError::from(agentplane_domain::ValidationError::new(
                    "instructions",
                    format!("instructions may add at most {MAX_INSTRUCTIONS_CHARS} characters"),
                )));
            }
            let config = &mut admitted.config;
            config.instructions = match config.instructions.is_empty() {
                true => text.clone(),
                false => format!("{}\n\n{text}", config.instructions),
            };
        }
        let (client_tools, tools) = super::tools::request_tools(body, &admitted.config)?;
        admitted.config.human_in_the_loop.client_tools.extend(client_tools);
        Ok(Self { instructions, tools, stream })
    }
}
