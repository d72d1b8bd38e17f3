//! `node-reports`: POST /node/v1/reports. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(NodeReports);
