//! `platform-files-put`: PUT /v1/environments/{environmentId}/files. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(PlatformFilesPut);
