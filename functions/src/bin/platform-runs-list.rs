//! `platform-runs-list`: GET /v1/environments/{environmentId}/sessions/{sessionId}/runs. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(PlatformRunsList);
