//! Turns through the client API: `POST /responses` (the draft), `POST /agents/responses` (the
//! published version) and `POST /sessions/{id}/messages`. The turn itself is
//! `agentplane_engine::TurnEngine::run_turn`. A Response is read back, cancelled, deleted and
//! its input listed in `retrieve` (`GET /responses/{response_id}` and the rest).

mod dialect;
mod fields;
pub(crate) mod handlers;
mod latest;
pub(crate) mod output;
mod replay;
pub(crate) mod retrieve;
pub mod rewind;
mod stream;
mod tools;
pub(crate) mod validation;
mod wire;

pub use handlers::{create_draft, create_published, session_message};
