//! Actions: a request that pauses a turn until someone answers it — a tool approval, a question
//! to the user (the `ask_user` tool), or a tool that runs in the caller's page (a client tool).
//! An action is answered at most once: `pending` moves to `resolved`, `expired` or `cancelled`
//! and never back. When no action of a paused turn is pending any more, the turn carries on
//! (a [`Continuation`] on the `runs` queue) and the model sees each action's [`Action::result`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::ids::InvalidId;
use crate::{ProjectId, SessionId, Timestamp, ValidationError};

/// The name of the tool the model calls to ask the user a question.
pub const ASK_USER_TOOL: &str = "ask_user";
/// The longest denial reason kept.
pub const MAX_REASON_CHARS: usize = 2_000;
/// The largest answer (`answers` or `output`) kept, as JSON text.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// `act_` and 24 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ActionId(String);

impl ActionId {
    /// From 12 random bytes (the caller owns the randomness).
    pub fn from_random(bytes: [u8; 12]) -> Self {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Self(format!("act_{hex}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ActionId {
    type Err = InvalidId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex = s.strip_prefix("act_").ok_or(InvalidId { kind: "action" })?;
        if hex.len() == 24 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            Ok(Self(s.to_owned()))
        } else {
            Err(InvalidId { kind: "action" })
        }
    }
}

impl TryFrom<String> for ActionId {
    type Error = InvalidId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<ActionId> for String {
    fn from(id: ActionId) -> String {
        id.0
    }
}

impl fmt::Display for ActionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the action asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionType {
    /// A tool in `humanInTheLoop.tool_approvals` that the model called: approve or deny.
    Approval,
    /// The model called `ask_user`: free-form `answers`.
    Question,
    /// The model called a client tool: the caller runs it and answers its `output`.
    ClientTool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionStatus {
    Pending,
    Resolved,
    Expired,
    Cancelled,
}

impl ActionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Resolved => "resolved",
            Self::Expired => "expired",
            Self::Cancelled => "cancelled",
        }
    }

    /// `?status=` of the list route.
    pub fn from_query(param: &str, text: &str) -> Result<Self, ValidationError> {
        match text {
            "pending" => Ok(Self::Pending),
            "resolved" => Ok(Self::Resolved),
            "expired" => Ok(Self::Expired),
            "cancelled" => Ok(Self::Cancelled),
            _ => Err(ValidationError::new(
                param,
                format!("`{param}` must be one of pending, resolved, expired, cancelled"),
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Deny,
}

/// An answer, of the shape the action's type takes. `answers` and `output` are kept exactly as
/// given (never re-keyed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    Approval {
        decision: Decision,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    Question {
        answers: Value,
    },
    ClientTool {
        output: Value,
    },
}

/// The fields of an answer body as given: `Some(Value::Null)` is a field sent as `null`, `None`
/// one not sent. Which of them an answer takes, the action's type decides
/// ([`Answer::from_fields`]); reading them never fails.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct AnswerFields {
    #[serde(default, deserialize_with = "present")]
    pub decision: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub reason: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub answers: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub output: Option<Value>,
    /// Every other field: no answer takes one.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

/// A field that is there, `null` included.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl From<&serde_json::Map<String, Value>> for AnswerFields {
    fn from(body: &serde_json::Map<String, Value>) -> Self {
        let mut other = body.clone();
        Self {
            decision: other.remove("decision"),
            reason: other.remove("reason"),
            answers: other.remove("answers"),
            output: other.remove("output"),
            other,
        }
    }
}

impl AnswerFields {
    /// The first field (by name) given that an answer to a `kind` action does not take.
    fn first_foreign(&self, kind: ActionType) -> Option<String> {
        let allowed: &[&str] = match kind {
            ActionType::Approval => &["decision", "reason"],
            ActionType::Question => &["answers"],
            ActionType::ClientTool => &["output"],
        };
        let known = [
            ("answers", &self.answers),
            ("decision", &self.decision),
            ("output", &self.output),
            ("reason", &self.reason),
        ];
        let known = known.into_iter().filter(|(name, value)| value.is_some() && !allowed.contains(name));
        known.map(|(name, _)| name.to_owned()).chain(self.other.keys().cloned()).min()
    }
}

impl Answer {
    /// Reads an answer body for an action of `kind`; see [`Answer::from_fields`].
    pub fn from_body(
        kind: ActionType,
        body: &serde_json::Map<String, Value>,
    ) -> Result<Self, ValidationError> {
        Self::from_fields(kind, AnswerFields::from(body))
    }

    /// The answer to an action of `kind`: approval `{decision, reason?}`, question `{answers}`,
    /// client tool `{output}`. Fields of another type are refused by name.
    pub fn from_fields(kind: ActionType, fields: AnswerFields) -> Result<Self, ValidationError> {
        if let Some(unknown) = fields.first_foreign(kind) {
            return Err(ValidationError::new(
                unknown.clone(),
                format!("`{unknown}` is not part of an answer to a {} action", kind.as_str()),
            ));
        }
        let sized = |field: &str, value: Value| -> Result<Value, ValidationError> {
            if serde_json::to_string(&value).map_or(usize::MAX, |t| t.len()) > MAX_ANSWER_BYTES {
                return Err(ValidationError::new(
                    field,
                    format!("`{field}` may be at most {MAX_ANSWER_BYTES} bytes of JSON"),
                ));
            }
            Ok(value)
        };
        match kind {
            ActionType::Approval => {
                let decision = match fields.decision {
                    Some(Value::String(s)) if s == "approve" => Decision::Approve,
                    Some(Value::String(s)) if s == "deny" => Decision::Deny,
                    None | Some(Value::Null) => {
                        return Err(ValidationError::new("decision", "`decision` is required"));
                    }
                    Some(_) => {
                        return Err(ValidationError::new("decision", "`decision` must be approve or deny"));
                    }
                };
                let reason = match fields.reason {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) if s.chars().count() <= MAX_REASON_CHARS => Some(s),
                    Some(Value::String(_)) => {
                        return Err(ValidationError::new(
                            "reason",
                            format!("`reason` may be at most {MAX_REASON_CHARS} characters"),
                        ));
                    }
                    Some(_) => return Err(ValidationError::new("reason", "`reason` must be a string")),
                };
                Ok(Self::Approval { decision, reason })
            }
            ActionType::Question => match fields.answers {
                None | Some(Value::Null) => Err(ValidationError::new("answers", "`answers` is required")),
                Some(value) => Ok(Self::Question { answers: sized("answers", value)? }),
            },
            ActionType::ClientTool => match fields.output {
                None => Err(ValidationError::new("output", "`output` is required")),
                Some(value) => Ok(Self::ClientTool { output: sized("output", value)? }),
            },
        }
    }
}

impl ActionType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approval => "approval",
            Self::Question => "question",
            Self::ClientTool => "client_tool",
        }
    }
}

/// One action of a paused turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub id: ActionId,
    pub project_id: ProjectId,
    pub session_id: SessionId,
    /// The paused turn.
    pub turn_id: String,
    /// The version of the turn's saved state that the pause wrote; a continuation names it.
    pub pause_version: u64,
    /// The model's tool call this action stands for.
    pub call_id: String,
    #[serde(rename = "type")]
    pub kind: ActionType,
    pub status: ActionStatus,
    /// The tool the model called (every type: `ask_user` for a question).
    pub tool: String,
    /// The call's arguments exactly as the model gave them (JSON, or the text when not JSON).
    pub args: Value,
    /// The question, for `question`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    pub created_at: Timestamp,
    /// When it expires unanswered; `None`: never (`approval_timeout_minutes: 0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// When it left `pending`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_at: Option<Timestamp>,
    /// The keys that may answer it (the running version's `humanInTheLoop.answer_key_ids`);
    /// `None`, as actions stored before read, any key of the project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_key_ids: Option<Vec<crate::ApiKeyId>>,
}

/// When an action created at `now` expires: `timeout_minutes` later, never for 0.
pub fn expires_at(now: Timestamp, timeout_minutes: u32) -> Option<Timestamp> {
    (timeout_minutes > 0).then(|| now.plus_millis(i64::from(timeout_minutes) * 60_000))
}

/// The question of an `ask_user` call: its `question` argument, or the arguments as text.
pub fn question_of(args: &Value) -> String {
    match args.get("question") {
        Some(Value::String(q)) => q.clone(),
        _ => match args {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        },
    }
}

/// What the model is told for a settled action, instead of (or before) running the tool.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// An approved tool: run it as the model asked.
    Run,
    /// The result the model sees (`is_error` when the call did not happen).
    Result { output: Value, is_error: bool },
}

impl Action {
    /// Whether the key `key` (of the action's project) may answer it.
    pub fn may_answer(&self, key: &crate::ApiKeyId) -> bool {
        self.answer_key_ids.as_ref().is_none_or(|ids| ids.contains(key))
    }

    /// What the turn does with this action when it carries on. Still pending (cannot happen
    /// once the turn continues) reads as expired.
    pub fn resolution(&self) -> Resolution {
        match (&self.status, &self.answer) {
            (ActionStatus::Resolved, Some(Answer::Approval { decision: Decision::Approve, .. })) => {
                Resolution::Run
            }
            (ActionStatus::Resolved, Some(Answer::Approval { decision: Decision::Deny, reason })) => {
                Resolution::Result { output: json!({"denied": true, "reason": reason}), is_error: true }
            }
            (ActionStatus::Resolved, Some(Answer::Question { answers })) => {
                Resolution::Result { output: json!({"answers": answers}), is_error: false }
            }
            (ActionStatus::Resolved, Some(Answer::ClientTool { output })) => {
                Resolution::Result { output: output.clone(), is_error: false }
            }
            (ActionStatus::Cancelled, _) => Resolution::Result {
                output: json!({"cancelled": true, "message": "the action was cancelled"}),
                is_error: true,
            },
            _ => Resolution::Result {
                output: json!({"expired": true, "message": "nobody answered before the action expired"}),
                is_error: true,
            },
        }
    }

    /// Settles a pending action at `now` (the state machine's one move; storage makes it
    /// conditional). `Err` carries the status it already has.
    pub fn settle(
        &mut self,
        status: ActionStatus,
        answer: Option<Answer>,
        now: Timestamp,
    ) -> Result<(), ActionStatus> {
        if self.status != ActionStatus::Pending {
            return Err(self.status);
        }
        self.status = status;
        self.answer = answer;
        self.settled_at = Some(now);
        Ok(())
    }
}

/// A message on the `runs` queue: carry on the paused turn `turn_id` of a session from the saved
/// state `version`. Claimed with a conditional write, so a duplicate delivery does nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Continuation {
    pub project_id: ProjectId,
    pub session_id: SessionId,
    pub turn_id: String,
    pub version: u64,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn body(v: Value) -> serde_json::Map<String, Value> {
        match v {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        }
    }

    #[test]
    fn action_ids_are_act_and_24_hex() {
        let id = ActionId::from_random([0xab; 12]);
        assert_eq!(id.as_str(), "act_abababababababababababab");
        assert_eq!(id.as_str().parse::<ActionId>(), Ok(id));
        for bad in ["act_", "act_ABABABABABABABABABABABAB", "run_abababababababababababab", "act_abab", ""] {
            assert!(bad.parse::<ActionId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn answers_take_the_shape_of_their_type() {
        assert_eq!(
            Answer::from_body(ActionType::Approval, &body(json!({"decision": "deny", "reason": "no"}))),
            Ok(Answer::Approval { decision: Decision::Deny, reason: Some("no".into()) })
        );
        let param = |kind, v| Answer::from_body(kind, &body(v)).err().and_then(|e| e.param);
        assert_eq!(param(ActionType::Approval, json!({})).as_deref(), Some("decision"));
        assert_eq!(param(ActionType::Approval, json!({"decision": "maybe"})).as_deref(), Some("decision"));
        assert_eq!(
            param(ActionType::Approval, json!({"decision": "approve", "output": 1})).as_deref(),
            Some("output")
        );
        assert_eq!(param(ActionType::Question, json!({"decision": "approve"})).as_deref(), Some("decision"));
        assert_eq!(param(ActionType::Question, json!({})).as_deref(), Some("answers"));
        assert_eq!(param(ActionType::ClientTool, json!({})).as_deref(), Some("output"));
        let big = "x".repeat(MAX_ANSWER_BYTES);
        assert_eq!(param(ActionType::ClientTool, json!({"output": big})).as_deref(), Some("output"));
        // Answers are kept exactly as given.
        let answers = json!({"Some Key": [1, {"camelCase": true}]});
        assert_eq!(
            Answer::from_body(ActionType::Question, &body(json!({"answers": answers.clone()}))),
            Ok(Answer::Question { answers })
        );
    }

    #[test]
    fn answer_fields_read_as_the_map_does() {
        for given in [
            json!({"output": null}),
            json!({"output": 1, "decision": "approve"}),
            json!({"zeta": 1, "answers": 2, "alpha": 3}),
            json!({"decision": "approve", "reason": null}),
            json!({}),
        ] {
            let read: AnswerFields = serde_json::from_value(given.clone()).expect("never fails");
            assert_eq!(read, AnswerFields::from(&body(given.clone())), "{given}");
        }
        // The first field by name is the one refused, a known one or not.
        let read = AnswerFields::from(&body(json!({"zeta": 1, "answers": 2, "alpha": 3})));
        assert_eq!(read.first_foreign(ActionType::ClientTool).as_deref(), Some("alpha"));
        let read = AnswerFields::from(&body(json!({"zeta": 1, "answers": 2, "output": 3})));
        assert_eq!(read.first_foreign(ActionType::ClientTool).as_deref(), Some("answers"));
        // `null` is given; absent is not.
        let read = AnswerFields::from(&body(json!({"output": null})));
        assert_eq!(read.output, Some(Value::Null));
        assert_eq!(
            Answer::from_fields(ActionType::ClientTool, read),
            Ok(Answer::ClientTool { output: Value::Null })
        );
    }

    #[test]
    fn an_action_settles_once_and_tells_the_model_what_happened() {
        let now = Timestamp::from_unix_millis(1_000);
        let mut action = Action {
            id: ActionId::from_random([1; 12]),
            project_id: ProjectId::from_random([1; 16]),
            session_id: SessionId::from_random([2; 16]),
            turn_id: "turn_1".into(),
            pause_version: 3,
            call_id: "call_1".into(),
            kind: ActionType::Approval,
            status: ActionStatus::Pending,
            tool: "add".into(),
            args: json!({"a": 1}),
            question: None,
            answer: None,
            created_at: now,
            expires_at: expires_at(now, 1440),
            settled_at: None,
            answer_key_ids: None,
        };
        assert_eq!(action.expires_at, Some(Timestamp::from_unix_millis(1_000 + 86_400_000)));
        assert_eq!(expires_at(now, 0), None);
        assert_eq!(
            action.resolution(),
            Resolution::Result {
                output: json!({"expired": true, "message": "nobody answered before the action expired"}),
                is_error: true
            }
        );
        let approve = Answer::Approval { decision: Decision::Approve, reason: None };
        assert_eq!(action.settle(ActionStatus::Resolved, Some(approve.clone()), now), Ok(()));
        assert_eq!(action.resolution(), Resolution::Run);
        assert_eq!(action.settle(ActionStatus::Expired, None, now), Err(ActionStatus::Resolved));
        action.answer = Some(Answer::Approval { decision: Decision::Deny, reason: Some("not now".into()) });
        assert_eq!(
            action.resolution(),
            Resolution::Result { output: json!({"denied": true, "reason": "not now"}), is_error: true }
        );
    }

    #[test]
    fn a_question_is_its_argument() {
        assert_eq!(question_of(&json!({"question": "Which city?"})), "Which city?");
        assert_eq!(question_of(&json!("plain")), "plain");
    }
}
