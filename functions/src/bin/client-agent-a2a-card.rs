//! `client-agent-a2a-card`: GET /api/client/v1/agents/{agent_id}/a2a/.well-known/agent-card.json. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientAgentA2aCard);
