//! `client-session-files-delete`: DELETE /api/client/v1/sessions/{session_id}/files/{file_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientSessionFilesDelete);
