//! `platform-sessions-create`: POST /v1/environments/{environmentId}/sessions. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(PlatformSessionsCreate);
