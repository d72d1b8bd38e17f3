//! `node-token-rotate`: POST /node/v1/token. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(NodeTokenRotate);
