//! `client-responses-create`: POST /api/client/v1/responses. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientResponsesCreate);
