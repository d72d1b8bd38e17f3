//! `client-session-actions-list`: GET /api/client/v1/sessions/{session_id}/actions. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientSessionActionsList);
