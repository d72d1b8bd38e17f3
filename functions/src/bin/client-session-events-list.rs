//! `client-session-events-list`: GET /api/client/v1/sessions/{session_id}/events. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientSessionEventsList);
