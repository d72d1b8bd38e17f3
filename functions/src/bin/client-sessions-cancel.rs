//! `client-sessions-cancel`: POST /api/client/v1/sessions/{session_id}/cancel. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientSessionsCancel);
