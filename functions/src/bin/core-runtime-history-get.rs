//! `core-runtime-history-get`: GET /core/v1/projects/{project_id}/sessions/{session_id}/runtime-history. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreRuntimeHistoryGet);
