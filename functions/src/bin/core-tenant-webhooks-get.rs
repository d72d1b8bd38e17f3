//! `core-tenant-webhooks-get`: GET /core/v1/tenants/{tenant_id}/webhooks/{endpoint_id}. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreTenantWebhooksGet);
