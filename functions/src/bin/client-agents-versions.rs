//! `client-agents-versions`: GET /api/client/v1/agents/{agent_id}/versions. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientAgentsVersions);
