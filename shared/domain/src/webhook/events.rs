//! The events a project's endpoints receive, and each one's `data` (camelCase, as webhook
//! payloads are): who it is about (`projectId`, `sessionId` and the same id as the spec's
//! `conversationId`, `turnId`) and the state it reports.
//! The body around it is [`super::payload`]: `{type, timestamp, data}`.
//!
//! | type              | when                                              | data beyond the ids                                   |
//! |-------------------|---------------------------------------------------|-------------------------------------------------------|
//! | `session.idled`   | a turn ends and the session goes idle             | `runtimeStatus: "idle"`, `stopReason`                 |
//! | `action.required` | a turn pauses for actions                         | `runtimeStatus: "requires_action"`, `actions`         |
//! | `budget.reached`  | the session budget pauses (`pause`) or ends a turn | `runtimeStatus`, `onExceed`, `spentUsd`, `maxCostUsd` |
//! | `agent_run.queued`, `.requires_action`, `.succeeded`, `.failed`, `.canceled` | a background run reaches that status | `runId`, `agentId`, `status`, `stopReason`, `outputText`, `error`, `pendingActionIds`, `costUsd` |
//! | `run.completed`, `.failed`, `.stopped`, `.reverted` | a platform Run reaches that status | `runId`, `environmentId`, `environmentSequence`, `status`, `error`, `fileDiffStatus`, `stopRequested` |

use serde_json::{Map, Value, json};

use crate::action::Action;
use crate::agent::BudgetAction;
use crate::session::StopReason;
use crate::{ProjectId, SessionId};

pub const SESSION_IDLED: &str = "session.idled";
pub const ACTION_REQUIRED: &str = "action.required";
pub const BUDGET_REACHED: &str = "budget.reached";

fn snake<T: serde::Serialize>(value: T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn ids(project: &ProjectId, session: &SessionId, turn_id: &str) -> serde_json::Map<String, Value> {
    let mut data = serde_json::Map::new();
    data.insert("projectId".into(), json!(project.to_string()));
    data.insert("sessionId".into(), json!(session.to_string()));
    // The spec's name for the session (a session's id is the bare conversation id).
    data.insert("conversationId".into(), json!(session.to_string()));
    data.insert("turnId".into(), json!(turn_id));
    data
}

/// A turn ended and its session is idle.
pub fn session_idled(
    project: &ProjectId,
    session: &SessionId,
    turn_id: &str,
    stop_reason: StopReason,
) -> Value {
    let mut data = ids(project, session, turn_id);
    data.insert("runtimeStatus".into(), json!("idle"));
    data.insert("stopReason".into(), snake(stop_reason));
    Value::Object(data)
}

/// A turn paused for `actions` (each: `id`, `type`, `tool`, `question` when one, `expiresAt`
/// in Unix seconds or `null`).
pub fn action_required(project: &ProjectId, session: &SessionId, turn_id: &str, actions: &[Action]) -> Value {
    let mut data = ids(project, session, turn_id);
    data.insert("runtimeStatus".into(), json!("requires_action"));
    let actions: Vec<Value> = actions
        .iter()
        .map(|a| {
            let mut item = json!({
                "id": a.id.to_string(),
                "type": snake(a.kind),
                "tool": a.tool,
                "expiresAt": a.expires_at.map(|t| t.unix_seconds()),
            });
            if let Some(question) = &a.question {
                item["question"] = json!(question);
            }
            item
        })
        .collect();
    data.insert("actions".into(), Value::Array(actions));
    Value::Object(data)
}

/// The session budget stopped a turn: it waits (`pause`, `budget_paused`) or it ended (`stop`,
/// the session idle).
pub fn budget_reached(
    project: &ProjectId,
    session: &SessionId,
    turn_id: &str,
    on_exceed: BudgetAction,
    spent_usd: f64,
    max_cost_usd: f64,
) -> Value {
    let mut data = ids(project, session, turn_id);
    let status = match on_exceed {
        BudgetAction::Pause => "budget_paused",
        BudgetAction::Stop => "idle",
    };
    data.insert("runtimeStatus".into(), json!(status));
    data.insert("onExceed".into(), snake(on_exceed));
    data.insert("spentUsd".into(), json!(spent_usd));
    data.insert("maxCostUsd".into(), json!(max_cost_usd));
    Value::Object(data)
}

/// A platform Run reached `run.status` (its `run.*` event): its ids, status, error and file
/// diff status.
pub fn platform_run(run: &crate::platform::run::Run) -> Value {
    let mut data = ids(&run.project_id, &run.session_id, &run.turn_id());
    data.insert("runId".into(), json!(run.id.to_string()));
    data.insert("environmentId".into(), json!(run.environment_id.to_string()));
    data.insert("environmentSequence".into(), json!(run.environment_sequence));
    data.insert("status".into(), json!(run.status.as_str()));
    // As the API shows it: a fixed message by code, never the text the executor recorded.
    let error = run.error.as_ref().map(crate::platform::public_error::run_error);
    data.insert("error".into(), error.map_or(Value::Null, |e| json!({"code": e.code, "message": e.message})));
    data.insert("fileDiffStatus".into(), snake(run.file_diff_status));
    data.insert("stopRequested".into(), json!(run.stop_requested));
    Value::Object(data)
}

/// A rollback of `run` was given up (`rollback.failed`): the Run as it reads again, and why.
pub fn rollback_failed(run: &crate::platform::run::Run, failure: &crate::platform::RollbackFailure) -> Value {
    let mut data = match platform_run(run) {
        Value::Object(data) => data,
        _ => Map::new(),
    };
    data.insert("rollbackError".into(), json!({"code": failure.code, "message": failure.message}));
    Value::Object(data)
}

/// A background run reached `run.status` (its `agent_run.*` event).
pub fn agent_run(run: &crate::agent_run::AgentRun) -> Value {
    let mut data = ids(&run.project_id, &run.session_id, &run.id.turn_id());
    data.insert("runId".into(), json!(run.id.to_string()));
    data.insert("agentId".into(), json!(run.agent_id.to_string()));
    data.insert("status".into(), json!(run.status.as_str()));
    data.insert("stopReason".into(), run.stop_reason.map_or(Value::Null, snake));
    data.insert("outputText".into(), json!(run.output_text));
    data.insert(
        "error".into(),
        run.error.as_ref().map_or(Value::Null, |e| json!({"code": e.code, "message": e.message})),
    );
    data.insert("pendingActionIds".into(), json!(run.pending_action_ids));
    data.insert("costUsd".into(), json!(run.cost_usd));
    Value::Object(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_camel_case_with_the_ids_and_the_state() {
        let p = ProjectId::from_random([1; 16]);
        let s = SessionId::from_random([2; 16]);
        let idled = session_idled(&p, &s, "turn_1", StopReason::EndTurn);
        assert_eq!(idled["projectId"], p.to_string());
        assert_eq!(idled["sessionId"], s.to_string());
        assert_eq!(idled["turnId"], "turn_1");
        assert_eq!(idled["runtimeStatus"], "idle");
        assert_eq!(idled["stopReason"], "end_turn");
        let budget = budget_reached(&p, &s, "turn_1", BudgetAction::Pause, 0.5, 0.25);
        assert_eq!(budget["runtimeStatus"], "budget_paused");
        assert_eq!(budget["onExceed"], "pause");
        assert_eq!(budget["spentUsd"], 0.5);
        assert_eq!(budget["maxCostUsd"], 0.25);
        assert_eq!(budget_reached(&p, &s, "t", BudgetAction::Stop, 1.0, 1.0)["runtimeStatus"], "idle");
        let paused = action_required(&p, &s, "turn_1", &[]);
        assert_eq!(paused["runtimeStatus"], "requires_action");
        assert_eq!(paused["actions"], json!([]));
    }

    /// A `run.failed` payload says what the API says: the code and its fixed message, never the
    /// text the executor recorded.
    #[test]
    fn a_platform_run_payload_carries_the_fixed_error_text() {
        use crate::platform::run::{NewRun, RunError, RunId, RunStatus};
        let mut run = NewRun::new("m", "x", Vec::new(), false).unwrap_or_else(|e| panic!("{e}")).into_run(
            RunId::from_random([1; 16]),
            ProjectId::from_random([2; 16]),
            crate::telemetry::EnvironmentId::from_random([3; 16]),
            SessionId::from_random([4; 16]),
            1,
            crate::Timestamp::from_unix_millis(0),
        );
        run.status = RunStatus::Failed;
        run.error = Some(RunError {
            code: "storage_unavailable".into(),
            message: "storage failed: http://10.0.0.7:4566/?X-Amz-Signature=f".into(),
        });
        let data = platform_run(&run);
        assert_eq!(
            data["error"],
            json!({"code": "storage_unavailable", "message": "storage was unavailable during the Run"})
        );
    }
}
