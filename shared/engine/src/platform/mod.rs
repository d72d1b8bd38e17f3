//! Platform Runs as the engine executes them: an environment's workspace (a sandbox on a node),
//! its checkpoints, the `run-execution` job's side of a Run and the `rollback-restore` job. The
//! Platform API (`/v1`) is an adapter over these: it validates, stores what the caller asked
//! for and answers; what happens to a workspace happens here.
//!
//! Everything runs over [`Platform`]: the store (the [`PlatformStore`] port and its parts), the
//! turn engine, the compute sandboxes run on (the [`Compute`] port, which the sandbox surface
//! implements) and one invocation's budget.
//!
//! [`PlatformStore`]: crate::ports::platform::PlatformStore

use std::time::Duration;

use crate::ports::Compute;
use crate::{ModelClient, TurnEngine};

pub mod checkpoint;
mod end;
pub mod environments;
pub mod error;
pub mod execute;
pub mod files;
pub mod fork;
pub mod lease;
pub mod outbox;
pub mod rollback;
mod running;
pub mod submit;
pub mod takeover;
mod tools;
pub mod workspace;

pub use error::WorkspaceError;

/// The largest workspace file one write takes (through the API or a Run's `write_file`).
pub const MAX_FILE_BYTES: usize = 256 * 1024;

/// What Platform Runs run over: `S` is the store (the use cases bound it by the ports of
/// [`crate::ports::platform`]), `C` the compute.
pub struct Platform<'a, S, C> {
    pub store: &'a S,
    pub engine: &'a TurnEngine<S, ModelClient>,
    pub compute: C,
    /// One invocation's budget for a Run's turn (the function's timeout less its margin).
    pub turn_budget: Duration,
    /// How long an execution lease holds unrenewed ([`lease::LEASE`]).
    pub lease: Duration,
    /// How long a rollback's restore is retried before the rollback is given up
    /// ([`rollback::ROLLBACK_GIVE_UP`]).
    pub rollback_give_up: Duration,
    /// How long a Run waits for a sandbox node before it fails ([`execute::NODE_WAIT`]).
    pub node_wait: Duration,
    /// The most environments a project may hold (`AGENTPLANE_MAX_ENVIRONMENTS_PER_PROJECT`).
    pub max_environments: u32,
}

impl<S: Clone, C: Compute> Platform<'_, S, C> {
    /// The same, for a task that outlives the borrow (the tools and the stop watcher need only
    /// the store).
    pub(crate) fn store(&self) -> S {
        self.store.clone()
    }
}
