//! `core-sandbox-node-token-reissue`: POST /core/v1/sandbox/nodes/{node_id}/token. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreSandboxNodeTokenReissue);
