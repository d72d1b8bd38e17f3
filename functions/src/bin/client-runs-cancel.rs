//! `client-runs-cancel`: POST /api/client/v1/runs/{run_id}/cancel. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientRunsCancel);
