//! `core-tenant-webhooks-list`: GET /core/v1/tenants/{tenant_id}/webhooks. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreTenantWebhooksList);
