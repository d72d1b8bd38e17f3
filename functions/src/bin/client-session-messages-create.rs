//! `client-session-messages-create`: POST /api/client/v1/sessions/{session_id}/messages. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientSessionMessagesCreate);
