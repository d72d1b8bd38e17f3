//! `client-session-message-edit`: POST /api/client/v1/sessions/{session_id}/events/{event_id}/edit. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientSessionMessageEdit);
