//! `sandbox-timeout`: POST /sandbox/v1/sandboxes/{sandbox_id}/timeout. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(SandboxTimeout);
