//! `/v1`: the Platform API (environments, their sessions and Runs), with a project key
//! (`Bearer cpeer_…`). Its own style: `{data}` around every object, camelCase, RFC 3339 UTC
//! times, strict bodies (an unknown field is a 400 naming it), `X-Request-Id` on every answer
//! and errors `{"error":{"code","message","requestId","details"?}}` (`error.rs`; the edge guard
//! adds `requestId`).

pub mod auth;
pub mod checkpoint;
pub mod environments;
pub mod error;
pub mod execute;
pub mod files;
pub mod fork;
pub mod rollback;
pub mod runs;
pub mod sessions;
pub mod wire;
pub mod workspace;
