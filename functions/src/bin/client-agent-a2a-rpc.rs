//! `client-agent-a2a-rpc`: POST /api/client/v1/agents/{agent_id}/a2a. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientAgentA2aRpc);
