//! `core-buckets-list`: GET /core/v1/projects/{project_id}/buckets. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreBucketsList);
