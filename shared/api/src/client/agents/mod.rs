//! Agents of the client API: a draft to edit, versions to publish. Handlers here, rules in
//! `agentplane_domain::agent`, storage in `agentplane_store::Agents`.

pub(crate) mod handlers;
mod wire;

pub use handlers::{create, get, list, publish, update, versions};
pub use wire::{render, render_version};
