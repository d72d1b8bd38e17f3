//! `sandbox-v2-list`: GET /sandbox/v1/v2/sandboxes. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(SandboxV2List);
