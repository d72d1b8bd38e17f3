//! Webhook endpoints, surface-neutral: what managing one does ([`service`]), for a project
//! (the client API's `/api/client/v1/webhooks`) or for a whole tenant (Core's
//! `/core/v1/tenants/{id}/webhooks`), its errors ([`error`], one mapping to the envelope both
//! surfaces answer with) and its wire ([`wire`], camelCase). The surfaces' handlers only
//! authenticate, name the owner and carry their OpenAPI annotations. Rules live in
//! `agentplane_domain::webhook`, sending in `agentplane_engine::webhooks`, storage in
//! `agentplane_store::Webhooks`.

pub mod error;
pub mod service;
pub mod wire;

pub use error::WebhookError;
