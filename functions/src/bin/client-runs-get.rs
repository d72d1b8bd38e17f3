//! `client-runs-get`: GET /api/client/v1/runs/{run_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientRunsGet);
