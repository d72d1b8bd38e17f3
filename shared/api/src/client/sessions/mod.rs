//! The sessions routes of the client API: handlers here, body rules in `validation`, the wire
//! object in `wire`, storage in `agentplane_store::Sessions`.

pub(crate) mod handlers;
mod runtime;
mod validation;
mod wire;

pub use handlers::{create, delete, get, list, update};
pub use wire::render;
