//! What a sandbox's lifecycle reads and writes besides its record: the nodes that may take a new
//! sandbox, and the records of one project.

use std::future::Future;

use agentplane_domain::ProjectId;
use agentplane_domain::sandbox::{Node, Sandbox, SandboxId};

use super::commands::NodeCommands;
use super::{PortError, SandboxRecords};

/// Sandboxes made, changed and ended on their nodes.
pub trait SandboxLifecycle: SandboxRecords + NodeCommands + Send + Sync {
    /// Every registered node, online or not.
    fn registered_nodes(&self) -> impl Future<Output = Result<Vec<Node>, PortError>> + Send;

    /// Records a new sandbox (its id is new: `Conflict` otherwise).
    fn create_sandbox(&self, sandbox: &Sandbox) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Records a new sandbox if its project has fewer than `max` live sandboxes of the sandbox
    /// API at `now`; `Conflict` when it has `max` already.
    fn create_sandbox_within(
        &self,
        sandbox: &Sandbox,
        max: u32,
        now: agentplane_domain::Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// The sandbox `id` of `project`; `NotFound` when the project has none.
    fn project_sandbox(
        &self,
        project: &ProjectId,
        id: &SandboxId,
    ) -> impl Future<Output = Result<Sandbox, PortError>> + Send;
}
