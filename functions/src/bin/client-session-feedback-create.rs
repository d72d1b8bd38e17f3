//! `client-session-feedback-create`: POST /api/client/v1/sessions/{session_id}/events/{event_id}/feedback. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientSessionFeedbackCreate);
