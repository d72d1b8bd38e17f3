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
