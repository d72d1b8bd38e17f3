//! The client API (`/api/client/v1`): integrators, authenticated by a project key.

pub mod a2a;
pub mod actions;
pub mod agents;
pub mod auth;
pub mod error;
pub mod events;
pub mod feedback;
pub mod files;
pub mod responses;
pub mod runs;
pub mod sessions;
pub mod webhooks;
pub mod wire;
