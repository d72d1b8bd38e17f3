//! `core-api-keys-revoke`: DELETE /core/v1/projects/{project_id}/api_keys/{key_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreApiKeysRevoke);
