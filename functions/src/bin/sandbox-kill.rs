//! `sandbox-kill`: DELETE /sandbox/v1/sandboxes/{sandbox_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(SandboxKill);
