//! Sandboxes, their processes and the nodes that host them: the pure rules (ids, deadline and
//! timeout arithmetic, the lifecycle state machine, output retention, host telemetry
//! arithmetic). Storage, HTTP and the provider live elsewhere.

pub mod command;
pub mod host;
pub mod ids;
pub mod lifecycle;
pub mod process;
pub mod request;
pub mod retention;

pub use ids::{NodeTokenSecret, ProcessId, SandboxId};
pub use lifecycle::{Lifecycle, LifecycleError, SandboxState, TimeoutSeconds};
pub use process::{ProcessConfig, ProcessRecord, ProcessState};
