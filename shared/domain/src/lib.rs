//! The pure core of Agentplane. Everything here takes values and returns values: no AWS types, no
//! clock reads (callers pass `now`), no I/O. The rules that are easy to get wrong live here so that
//! they are cheap to test exhaustively.

pub mod a2a;
pub mod action;
pub mod agent;
pub mod agent_run;
pub mod allocation;
pub mod api_key;
pub mod bucket;
pub mod ceilings;
pub mod error;
pub mod event;
pub mod feedback;
pub mod file;
pub mod ids;
pub mod metadata;
pub mod page;
pub mod platform;
pub mod pricing;
pub mod project;
pub mod query;
pub mod quota;
pub mod sandbox;
pub mod session;
pub mod telemetry;
pub mod tenant;
pub mod time;
pub mod webhook;

pub use error::ValidationError;
pub use ids::{ApiKeyId, ProjectId, SessionId};
pub use time::Timestamp;
