//! `core-buckets-register`: POST /core/v1/projects/{project_id}/buckets. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreBucketsRegister);
