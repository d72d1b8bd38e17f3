//! `client-responses-input-items`: GET /api/client/v1/responses/{response_id}/input_items. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientResponsesInputItems);
