//! `platform-environments-create`: POST /v1/environments. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(PlatformEnvironmentsCreate);
