//! An agent over the A2A protocol (JSON-RPC 2.0): a task is one turn, its context the session.
//! Here are the rules that need no I/O: task ids, the task state a turn is in, and how a
//! message's parts answer a pending action.

use serde_json::{Map, Value, json};

use crate::action::ActionType;
use crate::session::{RuntimeStatus, StopReason};
use crate::{SessionId, ValidationError};

/// A task: the turn `turn_id` of the session `session`. Rendered `{session}:{turn_id}`, so a
/// task names its session (the project check is the session's) without an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskId {
    pub session: SessionId,
    pub turn_id: String,
}

/// `turn_` and 24 lowercase hex digits: every turn id the engine makes.
pub fn is_turn_id(text: &str) -> bool {
    text.strip_prefix("turn_").is_some_and(|hex| {
        hex.len() == 24 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

impl TaskId {
    pub fn new(session: SessionId, turn_id: impl Into<String>) -> Self {
        Self { session, turn_id: turn_id.into() }
    }
}

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.session, self.turn_id)
    }
}

impl std::str::FromStr for TaskId {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        let (session, turn) = text.split_once(':').ok_or(())?;
        if !is_turn_id(turn) {
            return Err(());
        }
        let session: SessionId = session.parse().map_err(|_| ())?;
        // One spelling per task: the id as rendered, nothing else.
        let id = Self::new(session, turn);
        if id.to_string() != text {
            return Err(());
        }
        Ok(id)
    }
}

/// A task's state, as the protocol names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Canceled,
    Failed,
    Unknown,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Submitted => "submitted",
            Self::Working => "working",
            Self::InputRequired => "input-required",
            Self::Completed => "completed",
            Self::Canceled => "canceled",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
        }
    }

    /// No message moves it again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Canceled | Self::Failed)
    }

    /// The state of a turn that ended with `stop_reason`. A turn ends `requires_action` only in
    /// a Responses answer (the log's `turn.ended` never says it): it waits for input.
    pub fn of_ending(stop_reason: StopReason) -> Self {
        match stop_reason {
            StopReason::EndTurn => Self::Completed,
            StopReason::Cancelled => Self::Canceled,
            StopReason::RequiresAction => Self::InputRequired,
            // A limit, an error or a budget that stopped the turn: it ended without its answer.
            StopReason::Limit | StopReason::Error | StopReason::BudgetReached => Self::Failed,
        }
    }

    /// The state of a turn that has not ended (no `turn.ended` in the log): what the session
    /// is doing, when the turn is still the session's current one. A turn paused by its budget
    /// works on once the budget is raised (nothing the caller's message can answer).
    pub fn of_unended(current: bool, runtime: RuntimeStatus) -> Self {
        match (current, runtime) {
            (true, RuntimeStatus::RequiresAction) => Self::InputRequired,
            (true, RuntimeStatus::Running | RuntimeStatus::BudgetPaused) => Self::Working,
            // Its holder died before it wrote its end.
            _ => Self::Unknown,
        }
    }
}

/// A message part, as far as the runtime reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    Data(Map<String, Value>),
}

/// The parts of an A2A message (`params.message.parts`): `text` and `data` parts; a `file`
/// part is refused by kind (the caller sees which), anything else as malformed.
pub fn parts(value: Option<&Value>) -> Result<Vec<Part>, PartsError> {
    let Some(Value::Array(items)) = value else {
        return Err(PartsError::Invalid(ValidationError::new(
            "message.parts",
            "`message.parts` must be an array",
        )));
    };
    if items.is_empty() {
        return Err(PartsError::Invalid(ValidationError::new(
            "message.parts",
            "`message.parts` must hold at least one part",
        )));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let param = format!("message.parts[{i}]");
        let kind = item.get("kind").and_then(Value::as_str);
        match kind {
            Some("text") => match item.get("text") {
                Some(Value::String(text)) => out.push(Part::Text(text.clone())),
                _ => {
                    return Err(PartsError::Invalid(ValidationError::new(
                        format!("{param}.text"),
                        format!("`{param}.text` must be a string"),
                    )));
                }
            },
            Some("data") => match item.get("data") {
                Some(Value::Object(data)) => out.push(Part::Data(data.clone())),
                _ => {
                    return Err(PartsError::Invalid(ValidationError::new(
                        format!("{param}.data"),
                        format!("`{param}.data` must be an object"),
                    )));
                }
            },
            Some("file") => return Err(PartsError::FileParts),
            _ => {
                return Err(PartsError::Invalid(ValidationError::new(
                    format!("{param}.kind"),
                    format!("`{param}.kind` must be text or data"),
                )));
            }
        }
    }
    Ok(out)
}

#[derive(Debug, Clone, PartialEq)]
pub enum PartsError {
    Invalid(ValidationError),
    /// `file` parts: session files are attached through the client API, not over A2A.
    FileParts,
}

/// The text of a message: its text parts, one per line.
pub fn text_of(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.as_str()),
            Part::Data(_) => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// An approval given in words: yes/approve or no/deny, whatever the case and the punctuation.
pub fn decision_of(text: &str) -> Option<&'static str> {
    let word = text.trim().trim_end_matches(['.', '!']).to_ascii_lowercase();
    match word.as_str() {
        "approve" | "approved" | "yes" | "y" | "ok" | "allow" => Some("approve"),
        "deny" | "denied" | "no" | "n" | "reject" | "refuse" => Some("deny"),
        _ => None,
    }
}

/// The answer body (as the actions route takes it) that a message gives the one pending action
/// of type `kind`: a `data` part is the body itself; otherwise the text is the approval's
/// decision (yes/no), the question's `answers`, or the client tool's `output`.
pub fn answer_body(kind: ActionType, parts: &[Part]) -> Result<Map<String, Value>, ValidationError> {
    if let Some(data) = parts.iter().find_map(|p| match p {
        Part::Data(d) => Some(d),
        Part::Text(_) => None,
    }) {
        return Ok(data.clone());
    }
    let text = text_of(parts);
    let body = match kind {
        ActionType::Approval => {
            let decision = decision_of(&text).ok_or_else(|| {
                ValidationError::new(
                    "message.parts",
                    "the task waits for an approval: answer yes or no (or a data part {\"decision\": \"approve\" | \"deny\", \"reason\"?})",
                )
            })?;
            json!({"decision": decision})
        }
        ActionType::Question => json!({"answers": text}),
        ActionType::ClientTool => json!({"output": text}),
    };
    Ok(match body {
        Value::Object(map) => map,
        _ => Map::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> SessionId {
        SessionId::from_random([0xab; 16])
    }

    #[test]
    fn a_task_id_names_its_session_and_turn_in_one_spelling() {
        let id = TaskId::new(session(), "turn_0123456789abcdef01234567");
        let text = id.to_string();
        assert_eq!(text.parse::<TaskId>(), Ok(id));
        assert!(format!("{}:turn_0123", session()).parse::<TaskId>().is_err());
        assert!(format!("{}:turn_0123456789ABCDEF01234567", session()).parse::<TaskId>().is_err());
        assert!("turn_0123456789abcdef01234567".parse::<TaskId>().is_err());
        assert!(format!("x{text}").parse::<TaskId>().is_err());
        assert!(
            format!("{}:turn_0123456789abcdef01234567", session().to_string().to_uppercase())
                .parse::<TaskId>()
                .is_err()
        );
    }

    #[test]
    fn a_turn_in_the_log_or_the_session_gives_the_task_state() {
        assert_eq!(TaskState::of_ending(StopReason::EndTurn), TaskState::Completed);
        assert_eq!(TaskState::of_ending(StopReason::Cancelled), TaskState::Canceled);
        assert_eq!(TaskState::of_ending(StopReason::Limit), TaskState::Failed);
        assert_eq!(TaskState::of_ending(StopReason::BudgetReached), TaskState::Failed);
        assert_eq!(TaskState::of_unended(true, RuntimeStatus::RequiresAction), TaskState::InputRequired);
        assert_eq!(TaskState::of_unended(true, RuntimeStatus::Running), TaskState::Working);
        assert_eq!(TaskState::of_unended(false, RuntimeStatus::Running), TaskState::Unknown);
        assert!(TaskState::Completed.is_terminal() && !TaskState::InputRequired.is_terminal());
        assert_eq!(TaskState::InputRequired.as_str(), "input-required");
    }

    #[test]
    fn parts_are_text_or_data_and_file_parts_are_refused_by_kind() {
        let ok = parts(Some(&json!([{"kind": "text", "text": "hi"}, {"kind": "data", "data": {"a": 1}}])));
        assert_eq!(ok.map(|p| p.len()), Ok(2));
        assert_eq!(parts(Some(&json!([{"kind": "file", "file": {}}]))), Err(PartsError::FileParts));
        assert!(matches!(parts(Some(&json!([]))), Err(PartsError::Invalid(_))));
        assert!(matches!(parts(None), Err(PartsError::Invalid(_))));
        assert!(
            matches!(parts(Some(&json!([{"kind": "text", "text": 3}]))), Err(PartsError::Invalid(e)) if e.param.as_deref() == Some("message.parts[0].text"))
        );
    }

    #[test]
    fn a_message_answers_the_pending_action_in_its_type_s_shape() {
        let text = |t: &str| vec![Part::Text(t.into())];
        let body = |v: Value| v.as_object().cloned().unwrap_or_default();
        assert_eq!(
            answer_body(ActionType::Approval, &text("Yes!")),
            Ok(body(json!({"decision": "approve"})))
        );
        assert_eq!(answer_body(ActionType::Approval, &text("no")), Ok(body(json!({"decision": "deny"}))));
        assert!(answer_body(ActionType::Approval, &text("maybe")).is_err());
        assert_eq!(answer_body(ActionType::Question, &text("blue")), Ok(body(json!({"answers": "blue"}))));
        assert_eq!(answer_body(ActionType::ClientTool, &text("42")), Ok(body(json!({"output": "42"}))));
        let data =
            vec![Part::Text("ignored".into()), Part::Data(body(json!({"decision": "deny", "reason": "r"})))];
        assert_eq!(
            answer_body(ActionType::Approval, &data),
            Ok(body(json!({"decision": "deny", "reason": "r"})))
        );
    }
}
