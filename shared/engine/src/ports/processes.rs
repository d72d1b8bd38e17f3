//! What the processes of a sandbox read and write from the sandbox API: the process numbers
//! and commands of the workspace's sandboxes ([`WorkspaceSandboxes`]), what was observed of
//! them ([`ProcessObservations`]) and whether their node is still heard ([`NodeRecords`]).

use super::ProcessObservations;
use super::nodes::NodeRecords;
use super::platform::WorkspaceSandboxes;

/// The processes of sandboxes: started through the node's commands, read as observed. Every
/// store that has the parts has it.
pub trait SandboxProcesses: WorkspaceSandboxes + ProcessObservations + NodeRecords + Send + Sync {}

impl<T> SandboxProcesses for T where T: WorkspaceSandboxes + ProcessObservations + NodeRecords + Send + Sync {}
