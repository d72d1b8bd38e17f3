//! `platform-sessions-list`: GET /v1/environments/{environmentId}/sessions. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(PlatformSessionsList);
