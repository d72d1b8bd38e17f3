//! `platform-sessions-get`: GET /v1/environments/{environmentId}/sessions/{sessionId}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(PlatformSessionsGet);
