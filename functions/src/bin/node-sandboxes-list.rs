//! `node-sandboxes-list`: GET /node/v1/sandboxes. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(NodeSandboxesList);
