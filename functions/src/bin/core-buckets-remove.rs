//! `core-buckets-remove`: DELETE /core/v1/projects/{project_id}/buckets/{bucket}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreBucketsRemove);
