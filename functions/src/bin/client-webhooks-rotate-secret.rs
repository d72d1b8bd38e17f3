//! `client-webhooks-rotate-secret`: POST /api/client/v1/webhooks/{endpoint_id}/rotate_secret. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientWebhooksRotateSecret);
