//! `core-tenant-webhooks-rotate-secret`: POST /core/v1/tenants/{tenant_id}/webhooks/{endpoint_id}/rotate_secret. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreTenantWebhooksRotateSecret);
