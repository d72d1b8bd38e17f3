//! `sandbox-process-output`: GET /sandbox/v1/sandboxes/{sandbox_id}/processes/{process_id}/output. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(SandboxProcessOutput);
