//! `client-agents-list`: GET /api/client/v1/agents. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientAgentsList);
