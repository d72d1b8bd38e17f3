//! `client-responses-cancel`: POST /api/client/v1/responses/{response_id}/cancel. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientResponsesCancel);
