//! `client-webhooks-update`: PATCH /api/client/v1/webhooks/{endpoint_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientWebhooksUpdate);
