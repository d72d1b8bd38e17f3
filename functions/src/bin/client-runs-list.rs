//! `client-runs-list`: GET /api/client/v1/runs. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientRunsList);
