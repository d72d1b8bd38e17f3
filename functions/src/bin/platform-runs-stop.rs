//! `platform-runs-stop`: POST /v1/environments/{environmentId}/sessions/{sessionId}/runs/{runId}/stop. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(PlatformRunsStop);
