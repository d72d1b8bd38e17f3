//! `core-tenants-create`: POST /core/v1/tenants. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreTenantsCreate);
