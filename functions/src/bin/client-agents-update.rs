//! `client-agents-update`: PATCH /api/client/v1/agents/{agent_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientAgentsUpdate);
