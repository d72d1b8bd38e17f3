//! The client API (`/api/client/v1`): integrators, authenticated by a project key.

pub mod auth;
pub mod error;
pub mod sessions;
