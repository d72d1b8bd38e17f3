//! `core-tenants-projects-attach`: PUT /core/v1/tenants/{tenant_id}/projects/{project_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreTenantsProjectsAttach);
