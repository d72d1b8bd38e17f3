//! `node-enroll`: POST /node/v1/enroll. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(NodeEnroll);
