//! `client-session-files-create`: POST /api/client/v1/sessions/{session_id}/files. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientSessionFilesCreate);
