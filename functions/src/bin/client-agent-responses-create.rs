//! `client-agent-responses-create`: POST /api/client/v1/agents/responses. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientAgentResponsesCreate);
