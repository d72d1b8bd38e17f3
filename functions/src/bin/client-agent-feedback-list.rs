//! `client-agent-feedback-list`: GET /api/client/v1/agents/{agent_id}/feedback. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientAgentFeedbackList);
