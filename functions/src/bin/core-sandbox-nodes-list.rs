//! `core-sandbox-nodes-list`: GET /core/v1/sandbox/nodes. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreSandboxNodesList);
