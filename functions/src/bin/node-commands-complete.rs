//! `node-commands-complete`: POST /node/v1/commands/{command_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(NodeCommandsComplete);
