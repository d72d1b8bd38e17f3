//! `core-tenant-webhooks-test`: POST /core/v1/tenants/{tenant_id}/webhooks/{endpoint_id}/test. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(CoreTenantWebhooksTest);
