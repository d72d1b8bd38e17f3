//! `sandbox-create`: POST /sandbox/v1/sandboxes. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(SandboxCreate);
