//! The sessions routes of the client API: handlers here, request bodies and the session object
//! in `wire` (converted into the domain's `NewSession` / `SessionPatch`), the writes in
//! `agentplane_engine::sessions`, reads in `agentplane_store::Sessions`.

pub(crate) mod handlers;
pub mod wire;

pub use handlers::{cancel, create, delete, get, list, update};
