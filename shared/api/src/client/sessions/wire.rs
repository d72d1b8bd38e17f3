//! The session object as the client API shows it (snake_case, Unix seconds).

use agentplane_domain::session::Session;
use serde_json::{Value, json};

pub fn render(session: &Session) -> Value {
    json!({
        "id": session.id,
        "object": "session",
        "agent_id": session.agent_id,
        "title": session.title.as_ref().map(|t| t.as_str()),
        "metadata": session.metadata,
        "environment_mode": session.environment_mode,
        "runtime_status": session.runtime_status,
        "stop_reason": session.stop_reason,
        // Measured usage: every recorded turn's tokens, a running turn's included.
        "usage": {
            "input_tokens": session.usage.input_tokens,
            "output_tokens": session.usage.output_tokens,
            "total_tokens": session.usage.total_tokens(),
            // The part spent on models with no price: counted, but not in `cost_usd`.
            "unpriced_input_tokens": session.unpriced_input_tokens,
            "unpriced_output_tokens": session.unpriced_output_tokens,
        },
        "cost_usd": session.cost_usd,
        "created_at": session.created_at.unix_seconds(),
        "updated_at": session.updated_at.unix_seconds(),
    })
}
