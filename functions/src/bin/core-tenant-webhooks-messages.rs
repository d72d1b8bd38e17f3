//! `core-tenant-webhooks-messages`: GET /core/v1/tenants/{tenant_id}/webhooks/{endpoint_id}/messages. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreTenantWebhooksMessages);
