//! `client-sessions-update`: PATCH /api/client/v1/sessions/{session_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientSessionsUpdate);
