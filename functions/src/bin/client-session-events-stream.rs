//! `client-session-events-stream`: GET /api/client/v1/sessions/{session_id}/events/stream. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientSessionEventsStream);
