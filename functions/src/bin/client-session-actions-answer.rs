//! `client-session-actions-answer`: POST /api/client/v1/sessions/{session_id}/actions/{action_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientSessionActionsAnswer);
