//! `client-sessions-list`: GET /api/client/v1/sessions. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientSessionsList);
