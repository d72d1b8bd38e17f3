//! `node-process-reserve`: POST /node/v1/sandboxes/{sandbox_id}/processes. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(NodeProcessReserve);
