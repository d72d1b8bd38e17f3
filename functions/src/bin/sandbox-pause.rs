//! `sandbox-pause`: POST /sandbox/v1/sandboxes/{sandbox_id}/pause. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(SandboxPause);
