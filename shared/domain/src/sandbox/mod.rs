//! Sandboxes, their processes and the nodes that host them: the pure rules (ids, deadline and
//! timeout arithmetic, the lifecycle state machine, output retention, host telemetry
//! arithmetic). Storage, HTTP and the provider live elsewhere.

pub mod command;
pub mod host;
pub mod ids;
pub mod lifecycle;
pub mod listing;
pub mod process;
pub mod request;
pub mod retention;

pub use ids::{NodeTokenSecret, ProcessId, SandboxId};
pub use lifecycle::{Lifecycle, LifecycleError, SandboxState, TimeoutSeconds};
pub use process::{ProcessConfig, ProcessRecord, ProcessState};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::NodeId;
use crate::metadata::Metadata;
use crate::{ProjectId, SessionId, Timestamp};

/// How long a Session's managed compute may run before its node ends it. A Session's sandbox
/// ends with the Session (released on delete); this bounds one that is never released.
pub const MANAGED_COMPUTE_LIFETIME_S: i64 = 30 * 24 * 3600;

/// The metadata key that names the Session whose managed compute a sandbox is.
pub const SESSION_METADATA_KEY: &str = "agentplane.session_id";

/// The metadata key that names the Platform environment whose workspace a sandbox holds (a
/// reserved key: clients cannot set it, so only the platform's sandboxes carry it).
pub const ENVIRONMENT_METADATA_KEY: &str = "agentplane.environment_id";

/// A sandbox: a workspace and the processes started in it, on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sandbox {
    pub id: SandboxId,
    pub project_id: ProjectId,
    pub node_id: NodeId,
    pub started_at: Timestamp,
    #[serde(flatten)]
    pub lifecycle: Lifecycle,
    pub metadata: Metadata,
    #[serde(default)]
    pub env_vars: BTreeMap<String, String>,
    /// What the provider could and could not enforce (filled in by the node).
    #[serde(default)]
    pub isolation: BTreeMap<String, String>,
    /// The Session whose managed compute this is; its lifecycle follows that Session's, so the
    /// sandbox API may use it but not pause, resume, extend or kill it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// The access token of the sandbox's envd, sealed at rest with the deployment's key (bound
    /// to the sandbox id); absent for sandboxes made before tokens, or by the platform itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envd_token_sealed: Option<String>,
}

/// The envd protocol version the node daemon speaks (E2B's `envdVersion`).
pub const ENVD_VERSION: &str = "0.5.7";

/// A registered sandbox node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: NodeId,
    pub name: String,
    pub created_at: Timestamp,
    #[serde(default)]
    pub connection_id: Option<String>,
    #[serde(default)]
    pub last_seen_at: Option<Timestamp>,
    #[serde(default)]
    pub host: Option<host::HostObservation>,
}

/// How long a node may be silent and still count as online.
pub const NODE_ONLINE_WINDOW_MS: i64 = 20_000;

impl Node {
    /// A node just registered or enrolled: never heard from. Its name is 1 to 128 characters.
    pub fn unseen(id: NodeId, name: String, now: Timestamp) -> Result<Self, crate::ValidationError> {
        if name.trim().is_empty() || name.chars().count() > 128 {
            return Err(crate::ValidationError::new(
                "name",
                "`name` must be a string of 1 to 128 characters",
            ));
        }
        Ok(Self { id, name, created_at: now, connection_id: None, last_seen_at: None, host: None })
    }

    pub fn online(&self, now: Timestamp) -> bool {
        self.last_seen_at.is_some_and(|t| now.unix_millis() - t.unix_millis() <= NODE_ONLINE_WINDOW_MS)
    }
}

/// A process as a reader should see it: when the sandbox has ended without the node
/// witnessing a process's end, or its node has been silent past the heartbeat window
/// (`node_online` false), nobody is watching that process: its state is unknown, not running,
/// and the gap is said out loud.
pub fn as_seen(mut record: ProcessRecord, sandbox_state: SandboxState, node_online: bool) -> ProcessRecord {
    if (sandbox_state.is_final() || !node_online) && record.state == ProcessState::Running {
        record.state = ProcessState::Unknown;
        record.observation_gap = true;
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::process::ProcessConfig;

    fn running() -> ProcessRecord {
        ProcessRecord {
            id: ProcessId::Observed(1),
            pid: 42,
            tag: None,
            config: ProcessConfig::default(),
            pty: false,
            started_at: Timestamp::from_unix_seconds(1),
            exited_at: None,
            exit_code: None,
            signal: None,
            state: ProcessState::Running,
            observed: true,
            observation_gap: false,
            output_truncated: false,
        }
    }

    #[test]
    fn a_running_process_is_unknown_with_a_gap_while_nobody_watches_it() {
        let seen = as_seen(running(), SandboxState::Running, true);
        assert_eq!((seen.state, seen.observation_gap), (ProcessState::Running, false));
        let away = as_seen(running(), SandboxState::Running, false);
        assert_eq!((away.state, away.observation_gap), (ProcessState::Unknown, true));
        let ended = as_seen(running(), SandboxState::Killed, true);
        assert_eq!((ended.state, ended.observation_gap), (ProcessState::Unknown, true));
        let exited = ProcessRecord { state: ProcessState::Exited, exit_code: Some(0), ..running() };
        assert_eq!(as_seen(exited.clone(), SandboxState::Running, false), exited, "a witnessed exit stays");
    }
}
