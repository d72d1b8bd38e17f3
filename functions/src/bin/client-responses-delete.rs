//! `client-responses-delete`: DELETE /api/client/v1/responses/{response_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientResponsesDelete);
