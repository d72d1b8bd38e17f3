//! `platform-runs-get`: GET /v1/environments/{environmentId}/sessions/{sessionId}/runs/{runId}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(PlatformRunsGet);
