//! `/v1`: the Platform API (environments, their sessions and Runs), with a project key
//! (`Bearer cpeer_…`). Its own style: `{data}` around every object, camelCase, RFC 3339 UTC
//! times, strict bodies (an unknown field is a 400 naming it), `X-Request-Id` on every answer
//! and errors `{"error":{"code","message","requestId","details"?}}` (`error.rs`; the edge guard
//! adds `requestId`).
//!
//! What happens to a workspace (its sandbox, checkpoints, a Run's execution, a rollback's
//! restore) is the engine's ([`agentplane_engine::platform`]); these modules validate, store
//! what the caller asked for and answer.

pub mod auth;
pub mod environments;
pub mod error;
pub mod files;
pub mod fork;
pub mod rollback;
pub mod runs;
pub mod sessions;
pub mod wire;

use agentplane_engine::platform::Platform;
use agentplane_store::Store;

use crate::App;
use crate::sandbox::managed::{Nodes, nodes};

/// The engine's Platform Runs over this deployment: its store, turn engine and nodes.
pub fn platform(app: &App) -> Platform<'_, Store, Nodes<'_>> {
    Platform {
        store: &app.store,
        engine: app.engine(),
        compute: nodes(app),
        turn_budget: app.background.invocation_budget,
        lease: agentplane_engine::platform::lease::LEASE,
        rollback_give_up: app.platform_limits.rollback_give_up,
        node_wait: app.platform_limits.node_wait,
        max_environments: app.caps.environments,
    }
}
