//! `sandbox-resume`: POST /sandbox/v1/sandboxes/{sandbox_id}/resume. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(SandboxResume);
