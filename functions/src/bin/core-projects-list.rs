//! `core-projects-list`: GET /core/v1/projects. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreProjectsList);
