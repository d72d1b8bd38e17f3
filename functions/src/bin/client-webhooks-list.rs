//! `client-webhooks-list`: GET /api/client/v1/webhooks. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientWebhooksList);
