//! `node-heartbeat`: POST /node/v1/heartbeat. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(NodeHeartbeat);
