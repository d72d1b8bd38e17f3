//! The actions routes of the client API: what a paused turn waits for (a tool approval, a
//! question, a client tool), listed, read and answered. Handlers here, the action object and the
//! answer bodies in `wire`, storage in `agentplane_store::Actions`, and carrying the turn on in
//! `agentplane_engine::continuation`.

pub(crate) mod handlers;
pub mod wire;

pub use handlers::{answer, get, list};
