//! The Core admin API (`/core/v1`): operators, authenticated by the deployment's Core key.

pub mod api_keys;
pub mod auth;
pub mod buckets;
pub mod error;
pub mod node_reads;
pub mod nodes;
pub mod projects;
pub mod runtime;
pub mod tenants;
pub mod webhooks;
pub mod wire;

/// A project id from a Core path: a malformed one names no project, so it is a 404.
pub(crate) fn project_id(text: &str) -> Result<agentplane_domain::ProjectId, error::CoreError> {
    text.parse().map_err(|_| error::CoreError::NotFound("project"))
}
