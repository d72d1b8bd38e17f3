//! `sandbox-list`: GET /sandbox/v1/sandboxes. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(SandboxList);
