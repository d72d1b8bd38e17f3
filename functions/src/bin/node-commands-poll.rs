//! `node-commands-poll`: GET /node/v1/commands. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(NodeCommandsPoll);
