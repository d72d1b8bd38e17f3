//! The Response object: `id` is `resp_{session_id}`.

use agentplane_domain::SessionId;
use agentplane_domain::metadata::Metadata;
use agentplane_domain::session::StopReason;
use agentplane_engine::TurnOutcome;
use serde_json::{Value, json};

/// `completed` for an answer; `incomplete` when a limit, a cancel, the budget or an error ended
/// the turn first; `requires_action` while it waits for a person.
pub fn status(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "completed",
        StopReason::RequiresAction => "requires_action",
        StopReason::Limit | StopReason::Cancelled | StopReason::BudgetReached | StopReason::Error => {
            "incomplete"
        }
    }
}

/// A Responses `stop_reason`: `completed` for a normal answer (the session's is `end_turn`).
pub fn stop_reason(stop: StopReason) -> Value {
    match stop {
        StopReason::EndTurn => json!("completed"),
        other => json!(other),
    }
}

pub struct Rendered<'a> {
    pub session_id: SessionId,
    pub agent_id: String,
    pub version: Option<u32>,
    pub model: &'a str,
    pub metadata: &'a Metadata,
    pub created_at: i64,
}

pub fn render(r: &Rendered<'_>, outcome: &TurnOutcome) -> Value {
    let output: Vec<Value> = outcome
        .output_text
        .iter()
        .map(|text| {
            json!({
                "type": "message", "role": "assistant", "status": "completed",
                "content": [{ "type": "output_text", "text": text }],
            })
        })
        .collect();
    let mut body = json!({
        "id": format!("resp_{}", r.session_id),
        "object": "response",
        "created_at": r.created_at,
        "status": status(outcome.stop_reason),
        "stop_reason": stop_reason(outcome.stop_reason),
        "output": output,
        "output_text": outcome.output_text.clone().unwrap_or_default(),
        "usage": {
            "input_tokens": outcome.usage.input_tokens,
            "output_tokens": outcome.usage.output_tokens,
            "total_tokens": outcome.usage.total_tokens(),
            "cost_usd": outcome.cost_usd,
            // Tokens of a model with no price: in the counts above, not in `cost_usd`.
            "unpriced_input_tokens": outcome.unpriced.input_tokens,
            "unpriced_output_tokens": outcome.unpriced.output_tokens,
        },
        "session_id": r.session_id,
        "turn_id": outcome.turn_id,
        "agent": { "id": r.agent_id, "version": r.version },
        "model": r.model,
        "metadata": r.metadata,
    });
    if let Some((code, message)) = &outcome.error {
        body["error"] = json!({ "code": code, "message": message });
    }
    body
}
