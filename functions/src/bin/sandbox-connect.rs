//! `sandbox-connect`: POST /sandbox/v1/sandboxes/{sandbox_id}/connect. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(SandboxConnect);
