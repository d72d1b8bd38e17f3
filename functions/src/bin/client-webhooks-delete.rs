//! `client-webhooks-delete`: DELETE /api/client/v1/webhooks/{endpoint_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientWebhooksDelete);
