//! `sandbox-v2-connect`: POST /sandbox/v1/v2/sandboxes/{sandbox_id}/connect. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(SandboxV2Connect);
