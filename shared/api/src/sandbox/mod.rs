//! The sandbox API (`/sandbox/v1`, E2B-compatible): sandboxes, their processes and retained
//! output. Project key in `X-API-Key` or as a bearer token; E2B error format.

pub mod auth;
pub mod e2b;
pub mod e2b_wire;
pub mod error;
pub mod managed;
pub mod processes;
pub mod sandboxes;
pub mod wire;
