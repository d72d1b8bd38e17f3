//! `core-runtime-observation-get`: GET /core/v1/projects/{project_id}/sessions/{session_id}/runtime-observation. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreRuntimeObservationGet);
