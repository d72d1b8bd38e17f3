//! `client-webhooks-messages`: GET /api/client/v1/webhooks/{endpoint_id}/messages. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientWebhooksMessages);
