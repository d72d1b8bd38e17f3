//! The actions routes' wire: the action object as the client API shows it (snake_case, Unix
//! seconds), the answer bodies it takes, and the list's `status` parameter.

use agentplane_domain::SessionId;
use agentplane_domain::action::{Action, ActionId, ActionStatus, ActionType, Answer, Decision};
use serde::Serialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

/// What an action asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = ActionType)]
pub enum ActionTypeName {
    /// Approve or deny a tool call: answer `{decision, reason?}`.
    Approval,
    /// The model asked the user (`ask_user`): answer `{answers}`.
    Question,
    /// A tool the caller runs: answer `{output}`.
    ClientTool,
}

impl From<ActionType> for ActionTypeName {
    fn from(kind: ActionType) -> Self {
        match kind {
            ActionType::Approval => Self::Approval,
            ActionType::Question => Self::Question,
            ActionType::ClientTool => Self::ClientTool,
        }
    }
}

/// Where an action is: `pending` until answered (`resolved`), expired or cancelled, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = ActionStatus)]
pub enum ActionStatusName {
    Pending,
    Resolved,
    Expired,
    Cancelled,
}

impl From<ActionStatus> for ActionStatusName {
    fn from(status: ActionStatus) -> Self {
        match status {
            ActionStatus::Pending => Self::Pending,
            ActionStatus::Resolved => Self::Resolved,
            ActionStatus::Expired => Self::Expired,
            ActionStatus::Cancelled => Self::Cancelled,
        }
    }
}

/// An approval's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = ApprovalDecision)]
pub enum DecisionName {
    Approve,
    Deny,
}

/// An approval: run the tool or not.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalAnswer {
    pub decision: DecisionName,
    /// Why, when denied (at most 2,000 characters); the model sees it.
    pub reason: Option<String>,
}

/// A question's answers, exactly as given (never re-keyed).
#[derive(Debug, Serialize, ToSchema)]
pub struct QuestionAnswer {
    /// Any JSON but `null`, at most 64 KiB as JSON text.
    pub answers: Value,
}

/// A client tool's result, exactly as given: what the model sees as the tool's output.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClientToolAnswer {
    /// Any JSON, at most 64 KiB as JSON text.
    pub output: Value,
}

/// An answer, of the shape of the action's `type`: approval `{decision, reason?}`, question
/// `{answers}`, client tool `{output}`. Also the body of `POST …/actions/{action_id}`, where a
/// field of another type is refused by name.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ActionAnswer {
    Approval(ApprovalAnswer),
    Question(QuestionAnswer),
    ClientTool(ClientToolAnswer),
}

impl From<&Answer> for ActionAnswer {
    fn from(answer: &Answer) -> Self {
        match answer {
            Answer::Approval { decision, reason } => Self::Approval(ApprovalAnswer {
                decision: match decision {
                    Decision::Approve => DecisionName::Approve,
                    Decision::Deny => DecisionName::Deny,
                },
                reason: reason.clone(),
            }),
            Answer::Question { answers } => Self::Question(QuestionAnswer { answers: answers.clone() }),
            Answer::ClientTool { output } => Self::ClientTool(ClientToolAnswer { output: output.clone() }),
        }
    }
}

/// An action: what a paused turn waits for. The turn carries on once none of its actions is
/// pending.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Action)]
pub struct ActionBody {
    #[schema(value_type = String, pattern = "^act_[0-9a-f]{24}$")]
    pub id: ActionId,
    /// Always `action`.
    #[schema(value_type = String, pattern = "^action$")]
    pub object: &'static str,
    #[schema(value_type = String)]
    pub session_id: SessionId,
    /// The paused turn.
    pub turn_id: String,
    #[serde(rename = "type")]
    pub kind: ActionTypeName,
    pub status: ActionStatusName,
    /// The tool the model called (`ask_user` for a question).
    pub tool: String,
    /// The call's arguments exactly as the model gave them.
    pub args: Value,
    /// The question, for `question`; otherwise `null`.
    pub question: Option<String>,
    /// The answer once `resolved`; otherwise `null`.
    pub answer: Option<ActionAnswer>,
    /// Unix seconds.
    pub created_at: i64,
    /// When it expires unanswered (Unix seconds); `null`: never.
    pub expires_at: Option<i64>,
    /// When it left `pending` (Unix seconds); `null` while pending.
    pub resolved_at: Option<i64>,
}

impl From<&Action> for ActionBody {
    fn from(action: &Action) -> Self {
        Self {
            id: action.id.clone(),
            object: "action",
            session_id: action.session_id,
            turn_id: action.turn_id.clone(),
            kind: action.kind.into(),
            status: action.status.into(),
            tool: action.tool.clone(),
            args: action.args.clone(),
            question: action.question.clone(),
            answer: action.answer.as_ref().map(ActionAnswer::from),
            created_at: action.created_at.unix_seconds(),
            expires_at: action.expires_at.map(|t| t.unix_seconds()),
            resolved_at: action.settled_at.map(|t| t.unix_seconds()),
        }
    }
}

/// `GET /api/client/v1/sessions/{session_id}/actions`.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ActionsParams {
    /// Only actions with this status.
    #[param(value_type = Option<ActionStatusName>)]
    status: Option<String>,
}

#[cfg(test)]
mod tests {
    use agentplane_domain::{ProjectId, Timestamp};
    use serde_json::json;

    use super::*;

    #[test]
    fn the_action_object_shows_args_and_answers_as_given() {
        let at = Timestamp::from_unix_millis(1_700_000_000_500);
        let action = Action {
            id: ActionId::from_random([7; 12]),
            project_id: ProjectId::from_random([1; 16]),
            session_id: SessionId::from_random([2; 16]),
            turn_id: "turn_1".into(),
            pause_version: 2,
            call_id: "call_1".into(),
            kind: ActionType::Question,
            status: ActionStatus::Resolved,
            tool: "ask_user".into(),
            args: json!({"question": "Which?", "Some Key": 1}),
            question: Some("Which?".into()),
            answer: Some(Answer::Question { answers: json!({"Some Key": 1, "camelCase": true}) }),
            created_at: at,
            expires_at: None,
            settled_at: Some(at),
            answer_key_ids: None,
        };
        let body = serde_json::to_value(ActionBody::from(&action)).unwrap_or_default();
        assert_eq!(
            body,
            json!({
                "id": "act_070707070707070707070707",
                "object": "action",
                "session_id": action.session_id.to_string(),
                "turn_id": "turn_1",
                "type": "question",
                "status": "resolved",
                "tool": "ask_user",
                "args": {"question": "Which?", "Some Key": 1},
                "question": "Which?",
                "answer": {"answers": {"Some Key": 1, "camelCase": true}},
                "created_at": 1_700_000_000,
                "expires_at": null,
                "resolved_at": 1_700_000_000,
            })
        );
        let approval = ActionAnswer::from(&Answer::Approval { decision: Decision::Deny, reason: None });
        assert_eq!(
            serde_json::to_value(approval).unwrap_or_default(),
            json!({"decision": "deny", "reason": null})
        );
    }
}
