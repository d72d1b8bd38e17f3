//! Content retention of Platform Runs: after a configured time from a Run's end, what people
//! and the agent wrote (its `input`, its `output`, and the content of its turn's events: the
//! messages, tool calls, tool results and questions) is erased and `content_deleted_at` set.
//! What the Run did and cost stays: its status, times, file diff, checkpoint, usage, and every
//! event's type, time and turn (with a tool call's name).

use serde_json::{Map, Value};

use super::run::Run;
use crate::Timestamp;
use crate::event::EventType;

/// What the retention step does with a Run at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Its content goes now.
    Erase,
    /// Not yet: look again once `at` is past the retention (the Run's end, or `now` while it
    /// has not ended).
    Later { at: Timestamp },
    /// Erased already.
    Done,
}

/// Whether `run`'s content is due for erasure at `now` under a retention of `retention_s`.
pub fn due(run: &Run, retention_s: i64, now: Timestamp) -> Due {
    if run.content_deleted_at.is_some() {
        return Due::Done;
    }
    match run.finished_at {
        Some(end) if run.status.is_finished() || run.status.is_reverted() => {
            if end.plus_seconds(retention_s) <= now { Due::Erase } else { Due::Later { at: end } }
        }
        _ => Due::Later { at: now },
    }
}

/// Erases the Run's own content at `now`.
pub fn erase(run: &mut Run, now: Timestamp) {
    run.input = String::new();
    run.output = None;
    run.content_deleted_at = Some(now);
}

/// The fields an erased event keeps: the audit facts of what happened, never what was said.
const KEPT: [&str; 4] = ["id", "call_id", "name", "tool"];

/// An event's data with its content erased, or `None` for an event that carries no content
/// (turn start and end, usage, errors, budget: kept as they are).
pub fn erased_event_data(kind: &EventType, data: &Value) -> Option<Value> {
    let content = matches!(
        kind,
        EventType::UserMessage
            | EventType::AssistantMessage
            | EventType::ToolCall
            | EventType::ToolResult
            | EventType::ActionRequired
            | EventType::Unknown(_)
    );
    if !content {
        return None;
    }
    let mut kept: Map<String, Value> = KEPT
        .iter()
        .filter_map(|k| data.get(*k).filter(|v| v.is_string()).map(|v| ((*k).to_owned(), v.clone())))
        .collect();
    kept.insert("_content_deleted".into(), Value::Bool(true));
    Some(Value::Object(kept))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::platform::run::{NewRun, RunId, RunStatus};
    use crate::telemetry::EnvironmentId;
    use crate::{ProjectId, SessionId};

    fn run(status: RunStatus, finished: Option<i64>) -> Run {
        let mut run = NewRun::new("m", "secret input", Vec::new(), false)
            .map(|n| {
                n.into_run(
                    RunId::from_random([1; 16]),
                    ProjectId::from_random([2; 16]),
                    EnvironmentId::from_random([3; 16]),
                    SessionId::from_random([4; 16]),
                    1,
                    Timestamp::from_unix_seconds(0),
                )
            })
            .unwrap_or_else(|_| unreachable!("a valid Run"));
        run.status = status;
        run.finished_at = finished.map(Timestamp::from_unix_seconds);
        run.output = Some("secret output".into());
        run
    }

    #[test]
    fn a_finished_run_is_erased_once_its_retention_after_its_end_has_passed() {
        let now = Timestamp::from_unix_seconds(1_000);
        assert_eq!(due(&run(RunStatus::Completed, Some(900)), 100, now), Due::Erase);
        assert_eq!(due(&run(RunStatus::Reverted, Some(900)), 100, now), Due::Erase);
        assert_eq!(
            due(&run(RunStatus::Completed, Some(901)), 100, now),
            Due::Later { at: Timestamp::from_unix_seconds(901) }
        );
        assert_eq!(due(&run(RunStatus::Running, None), 0, now), Due::Later { at: now });
        let mut erased = run(RunStatus::Failed, Some(0));
        erase(&mut erased, now);
        assert_eq!((erased.input.as_str(), erased.output.as_deref()), ("", None));
        assert_eq!(erased.content_deleted_at, Some(now));
        assert_eq!(due(&erased, 0, now), Due::Done);
    }

    #[test]
    fn erased_events_keep_their_names_and_ids_but_no_content() {
        let call = json!({"id": "c1", "name": "write_file", "arguments": {"content": "secret"}});
        assert_eq!(
            erased_event_data(&EventType::ToolCall, &call),
            Some(json!({"id": "c1", "name": "write_file", "_content_deleted": true}))
        );
        let result = json!({"call_id": "c1", "output": "secret", "name": {"nested": "secret"}});
        assert_eq!(
            erased_event_data(&EventType::ToolResult, &result),
            Some(json!({"call_id": "c1", "_content_deleted": true}))
        );
        assert_eq!(
            erased_event_data(&EventType::AssistantMessage, &json!({"text": "secret"})),
            Some(json!({"_content_deleted": true}))
        );
        assert_eq!(erased_event_data(&EventType::Usage, &json!({"input_tokens": 3})), None);
        assert_eq!(erased_event_data(&EventType::TurnEnded, &json!({"stop_reason": "end_turn"})), None);
    }
}
