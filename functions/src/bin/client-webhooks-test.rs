//! `client-webhooks-test`: POST /api/client/v1/webhooks/{endpoint_id}/test. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientWebhooksTest);
