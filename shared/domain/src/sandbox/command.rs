//! What Core and a node daemon say to each other: commands Core queues for a node, their
//! outcomes, and the observation events the node reports back. Plain data, serialised as JSON
//! over the node API.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ProcessConfig, ProcessId, SandboxId};
use crate::Timestamp;
use crate::ids::CommandId;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Command {
    CreateSandbox {
        sandbox_id: SandboxId,
        end_at: Timestamp,
        env_vars: BTreeMap<String, String>,
        /// The token envd clients must present (`X-Access-Token`); none: the sandbox serves no
        /// envd clients.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        envd_access_token: Option<String>,
    },
    StartProcess {
        sandbox_id: SandboxId,
        number: u32,
        config: ProcessConfig,
        tag: Option<String>,
    },
    Pause {
        sandbox_id: SandboxId,
    },
    Resume {
        sandbox_id: SandboxId,
        end_at: Timestamp,
    },
    SetDeadline {
        sandbox_id: SandboxId,
        end_at: Timestamp,
    },
    Kill {
        sandbox_id: SandboxId,
    },
    /// Writes `content` (base64) to `path` (relative to `/workspace`, canonical), creating the
    /// directories on the way; never through a symlink.
    WorkspaceWrite {
        sandbox_id: SandboxId,
        path: String,
        content: String,
    },
    /// Answers the file's bytes (base64) in `details.content`.
    WorkspaceRead {
        sandbox_id: SandboxId,
        path: String,
    },
    WorkspaceDelete {
        sandbox_id: SandboxId,
        path: String,
    },
    /// Answers the regular files under `path` (recursively, `.git` and protected state left
    /// out, symlinks not followed) as JSON `[{path, size, sha256}]` in `details.entries`.
    WorkspaceList {
        sandbox_id: SandboxId,
        path: String,
    },
    /// Hashes every regular file of `/workspace` (as `WorkspaceList` walks it, without its
    /// limit) and PUTs the listing (JSON `[{path, size, sha256}]`) to `upload_url`; answers
    /// `details.files`.
    WorkspaceScan {
        sandbox_id: SandboxId,
        upload_url: String,
    },
    /// GETs an upload plan (`platform::manifest::UploadPlan`) from `plan_url` and PUTs each
    /// file's bytes to its URL, after checking they still have its digest; answers
    /// `details.uploaded` and `details.bytes`.
    WorkspaceUpload {
        sandbox_id: SandboxId,
        plan_url: String,
    },
    /// GETs a restore plan (`platform::manifest::RestorePlan`) from `plan_url`: removes the
    /// regular files it does not keep and downloads each file whose content differs (checking
    /// its digest), never through a symlink; answers `details.removed` and `details.fetched`.
    WorkspaceRestore {
        sandbox_id: SandboxId,
        plan_url: String,
    },
}

impl Command {
    pub fn sandbox_id(&self) -> &SandboxId {
        match self {
            Self::CreateSandbox { sandbox_id, .. }
            | Self::StartProcess { sandbox_id, .. }
            | Self::Pause { sandbox_id }
            | Self::Resume { sandbox_id, .. }
            | Self::SetDeadline { sandbox_id, .. }
            | Self::Kill { sandbox_id }
            | Self::WorkspaceWrite { sandbox_id, .. }
            | Self::WorkspaceRead { sandbox_id, .. }
            | Self::WorkspaceDelete { sandbox_id, .. }
            | Self::WorkspaceList { sandbox_id, .. }
            | Self::WorkspaceScan { sandbox_id, .. }
            | Self::WorkspaceUpload { sandbox_id, .. }
            | Self::WorkspaceRestore { sandbox_id, .. } => sandbox_id,
        }
    }
}

/// A queued command as the node receives it. A command past `expires_at` is answered as
/// expired instead of executed, so a late delivery never starts what its caller gave up on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandEnvelope {
    pub id: CommandId,
    pub issued_at: Timestamp,
    pub expires_at: Timestamp,
    pub command: Command,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CommandOutcome {
    Done {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
        /// What the node wants recorded about the result (e.g. a new sandbox's isolation).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        details: BTreeMap<String, String>,
    },
    Failed {
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NodeEvent {
    ProcessStarted {
        sandbox_id: SandboxId,
        process: ProcessId,
        pid: u32,
        config: ProcessConfig,
        tag: Option<String>,
        at: Timestamp,
    },
    /// `data` is base64.
    Output { sandbox_id: SandboxId, process: ProcessId, stream: Stream, at: Timestamp, data: String },
    ProcessExited {
        sandbox_id: SandboxId,
        process: ProcessId,
        exit_code: Option<i32>,
        signal: Option<i32>,
        at: Timestamp,
    },
    /// A new daemon connection took the sandbox over: whatever the previous one was watching
    /// may have printed or ended unseen.
    ObservationResumed { sandbox_id: SandboxId, at: Timestamp },
    /// The node dropped this much of a process's oldest output before sending it, because
    /// the retention limits would have dropped it anyway.
    OutputDropped { sandbox_id: SandboxId, process: ProcessId, bytes: u64, chunks: u64 },
    /// A process found running that this connection did not see start.
    LiveSeen { sandbox_id: SandboxId, pid: u32, cmd: String, args: Vec<String>, at: Timestamp },
    /// The node enforced the deadline: every process was killed.
    SandboxExpired { sandbox_id: SandboxId, at: Timestamp },
    /// The sandbox's init exited though the node did not end it (killed from inside, or on
    /// the host): its PID namespace and every process in it ended. Core records it killed.
    InitExited { sandbox_id: SandboxId, at: Timestamp },
    /// How the provider isolates this sandbox (told once, after creation).
    Isolation { sandbox_id: SandboxId, isolation: BTreeMap<String, String> },
}

impl NodeEvent {
    pub fn sandbox_id(&self) -> &SandboxId {
        match self {
            Self::ProcessStarted { sandbox_id, .. }
            | Self::Output { sandbox_id, .. }
            | Self::OutputDropped { sandbox_id, .. }
            | Self::ProcessExited { sandbox_id, .. }
            | Self::ObservationResumed { sandbox_id, .. }
            | Self::LiveSeen { sandbox_id, .. }
            | Self::SandboxExpired { sandbox_id, .. }
            | Self::InitExited { sandbox_id, .. }
            | Self::Isolation { sandbox_id, .. } => sandbox_id,
        }
    }
}

/// A batch of events of one daemon connection. `seq` increases by one per event within a
/// connection, so a retried batch is applied once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub connection_id: String,
    pub events: Vec<SequencedEvent>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequencedEvent {
    pub seq: u64,
    pub event: NodeEvent,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_travel_as_tagged_json() {
        let cmd = Command::Kill { sandbox_id: SandboxId::from_random([1; 16]) };
        let text = serde_json::to_string(&cmd).expect("serialises");
        assert!(text.contains("\"type\":\"kill\""), "{text}");
        assert_eq!(serde_json::from_str::<Command>(&text).ok(), Some(cmd));
        let done: CommandOutcome = serde_json::from_str(r#"{"status":"done","pid":4}"#).expect("parses");
        assert_eq!(done, CommandOutcome::Done { pid: Some(4), details: BTreeMap::new() });
    }
}
