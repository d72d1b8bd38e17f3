//! Turns through the client API: `POST /responses` (the draft), `POST /agents/responses` (the
//! published version) and `POST /sessions/{id}/messages`. The turn itself is
//! `agentplane_engine::TurnEngine::run_turn`.

mod fields;
pub(crate) mod handlers;
pub(crate) mod output;
pub mod rewind;
mod stream;
mod tools;
pub(crate) mod validation;
mod wire;

pub use handlers::{create_draft, create_published, session_message};
