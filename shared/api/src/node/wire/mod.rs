//! The node API's wire: the bodies a node daemon sends (read with [`crate::body::Wire`] and
//! converted into the domain's `sandbox::command` and `sandbox::host` types) and the answers it
//! reads, as the OpenAPI document describes them. Field for field they are the domain's types,
//! which the daemon serializes and parses; unit tests hold the two to the same JSON. Ids and
//! timestamps keep their domain types (parsed by their own rules) and are documented as the
//! strings and integers they travel as.

use std::collections::BTreeMap;

use agentplane_domain::Timestamp;
use agentplane_domain::ids::CommandId;
use agentplane_domain::sandbox::command::{
    Command, CommandEnvelope, CommandOutcome, NodeEvent, Report, SequencedEvent, Stream,
};
use agentplane_domain::sandbox::host::{Heartbeat, SandboxUsage};
use agentplane_domain::sandbox::{ProcessConfig, ProcessId, Sandbox, SandboxId};
use agentplane_domain::telemetry::ProcStatCpu;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

mod commands;
mod heartbeat;
mod report;
#[cfg(test)]
mod tests;
mod tokens;

pub use commands::*;
pub use heartbeat::*;
pub use report::*;
pub use tokens::*;

/// How a process is started.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProcessConfigWire {
    pub cmd: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub envs: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

impl From<ProcessConfigWire> for ProcessConfig {
    fn from(c: ProcessConfigWire) -> Self {
        Self { cmd: c.cmd, args: c.args, envs: c.envs, cwd: c.cwd }
    }
}

impl From<&ProcessConfig> for ProcessConfigWire {
    fn from(c: &ProcessConfig) -> Self {
        Self { cmd: c.cmd.clone(), args: c.args.clone(), envs: c.envs.clone(), cwd: c.cwd.clone() }
    }
}

// ---- GET /node/v1/commands ----

/// A process number reserved for the node (`POST /node/v1/sandboxes/{sandbox_id}/processes`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReservedProcess {
    /// The process is `obs-<number>` in the sandbox's observations.
    pub number: u32,
}

/// The sandboxes this node hosts, as Core knows them.
#[derive(Debug, Serialize, ToSchema)]
pub struct NodeSandboxesBody {
    pub sandboxes: Vec<NodeSandboxBody>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NodeSandboxBody {
    #[schema(value_type = String)]
    pub sandbox_id: SandboxId,
    /// `running`, `paused`, `expired` or `killed`, as of now.
    #[schema(pattern = "^(running|paused|expired|killed)$")]
    pub state: &'static str,
    /// Unix milliseconds.
    #[schema(value_type = i64)]
    pub end_at: Timestamp,
    pub env_vars: BTreeMap<String, String>,
}

impl NodeSandboxBody {
    pub fn new(sandbox: &Sandbox, now: Timestamp) -> Self {
        Self {
            sandbox_id: sandbox.id.clone(),
            state: sandbox.lifecycle.effective(now).as_str(),
            end_at: sandbox.lifecycle.end_at,
            env_vars: sandbox.env_vars.clone(),
        }
    }
}
