//! `client-session-regenerate`: POST /api/client/v1/sessions/{session_id}/regenerate. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientSessionRegenerate);
