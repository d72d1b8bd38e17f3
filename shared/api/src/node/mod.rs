//! The node API (`/node/v1`): how node daemons talk to Core, over HTTP only, authenticated by
//! the node token. Errors use the Core envelope.

pub mod auth;
pub mod handlers;
pub mod report;
pub mod usage;
