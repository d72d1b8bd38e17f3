//! `core-api-keys-create`: POST /core/v1/projects/{project_id}/api_keys. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreApiKeysCreate);
