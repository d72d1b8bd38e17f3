//! `core-tenant-webhooks-redeliver`: POST /core/v1/tenants/{tenant_id}/webhooks/{endpoint_id}/messages/{message_id}/redeliver. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreTenantWebhooksRedeliver);
