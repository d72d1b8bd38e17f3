//! `core-sandbox-node-get`: GET /core/v1/sandbox/nodes/{node_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreSandboxNodeGet);
