//! Agents of the client API: a draft to edit, versions to publish. Handlers here, the wire in
//! `wire`, rules in `agentplane_domain::agent` (tested here, through the wire, in `tests`), storage in `agentplane_store::Agents`.

pub(crate) mod handlers;
#[cfg(test)]
mod tests;
pub mod wire;

pub use handlers::{create, get, list, publish, update, versions};
