//! `core-runtime-observations-list`: GET /core/v1/sandbox/runtime-observations. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreRuntimeObservationsList);
