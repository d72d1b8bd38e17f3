//! `client-webhooks-redeliver`: POST /api/client/v1/webhooks/{endpoint_id}/messages/{message_id}/redeliver. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientWebhooksRedeliver);
