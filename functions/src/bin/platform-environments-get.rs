//! `platform-environments-get`: GET /v1/environments/{environmentId}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(PlatformEnvironmentsGet);
