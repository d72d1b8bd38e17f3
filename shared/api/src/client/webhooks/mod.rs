//! Webhook endpoints of the client API: manage a project's endpoints (the `whsec_` secret is
//! shown on create and rotation only), send a test event, read messages and their attempts.
//! Handlers here, the wire (camelCase) in `wire`, rules in `agentplane_domain::webhook`,
//! sending in `agentplane_engine::webhooks`, storage in `agentplane_store::Webhooks`.

pub(crate) mod handlers;
pub use crate::webhooks::wire;

pub use handlers::{
    create, delete, get, list, messages, redeliver, rotate_callback_secret, rotate_secret, test, update,
};
