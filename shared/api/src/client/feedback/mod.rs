//! Feedback on assistant messages (thumbs up or down, an optional comment) and an agent's list.

pub mod handlers;
pub mod wire;
