//! `client-agents-publish`: POST /api/client/v1/agents/{agent_id}/publish. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientAgentsPublish);
