//! The node API (`/node/v1`): how node daemons talk to Core, over HTTP only, authenticated by
//! the node token. Errors use the Core envelope, decided in [`error`].

pub mod auth;
pub mod error;
pub mod handlers;
pub mod processes;
pub mod report;
pub mod tokens;
pub mod wire;
