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

/// The long poll's query.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct PollParams {
    /// The daemon connection polling, 1 to 64 characters, once.
    #[param(min_length = 1, max_length = 64)]
    connection: String,
    /// Seconds to wait for a command, 0 to 20 (default 20), once.
    #[param(minimum = 0, maximum = 20)]
    wait: Option<u64>,
}

/// The commands claimed by this poll (possibly none).
#[derive(Debug, Serialize, ToSchema)]
pub struct CommandsBody {
    pub commands: Vec<CommandEnvelopeBody>,
}

/// A queued command. One past `expires_at` is answered as expired instead of executed.
#[derive(Debug, Serialize, ToSchema)]
pub struct CommandEnvelopeBody {
    #[schema(value_type = String)]
    pub id: CommandId,
    /// Unix milliseconds.
    #[schema(value_type = i64)]
    pub issued_at: Timestamp,
    /// Unix milliseconds.
    #[schema(value_type = i64)]
    pub expires_at: Timestamp,
    pub command: CommandBody,
}

/// What the node is asked to do, by `type`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CommandBody {
    CreateSandbox {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        /// Unix milliseconds.
        #[schema(value_type = i64)]
        end_at: Timestamp,
        env_vars: BTreeMap<String, String>,
    },
    StartProcess {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        /// The process's number within the sandbox (`obs-<number>`).
        number: u32,
        config: ProcessConfigWire,
        #[schema(required = true)]
        tag: Option<String>,
    },
    Pause {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
    },
    Resume {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        #[schema(value_type = i64)]
        end_at: Timestamp,
    },
    SetDeadline {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        #[schema(value_type = i64)]
        end_at: Timestamp,
    },
    Kill {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
    },
    /// Write `content` (base64) to `path` (relative to `/workspace`), never through a symlink.
    WorkspaceWrite {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        path: String,
        content: String,
    },
    /// Answer the file's bytes (base64) in `details.content`.
    WorkspaceRead {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        path: String,
    },
    WorkspaceDelete {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        path: String,
    },
    /// Answer the regular files under `path` as JSON in `details.entries`.
    WorkspaceList {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        path: String,
    },
    /// Hash every regular file of the workspace and PUT the listing to `upload_url`.
    WorkspaceScan {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        upload_url: String,
    },
    /// GET the upload plan at `plan_url` and PUT each file's bytes to its presigned URL.
    WorkspaceUpload {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        plan_url: String,
    },
    /// GET the restore plan at `plan_url`: remove the files it does not keep, download the rest.
    WorkspaceRestore {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        plan_url: String,
    },
}

impl From<&Command> for CommandBody {
    fn from(command: &Command) -> Self {
        match command {
            Command::CreateSandbox { sandbox_id, end_at, env_vars } => Self::CreateSandbox {
                sandbox_id: sandbox_id.clone(),
                end_at: *end_at,
                env_vars: env_vars.clone(),
            },
            Command::StartProcess { sandbox_id, number, config, tag } => Self::StartProcess {
                sandbox_id: sandbox_id.clone(),
                number: *number,
                config: config.into(),
                tag: tag.clone(),
            },
            Command::Pause { sandbox_id } => Self::Pause { sandbox_id: sandbox_id.clone() },
            Command::Resume { sandbox_id, end_at } => {
                Self::Resume { sandbox_id: sandbox_id.clone(), end_at: *end_at }
            }
            Command::SetDeadline { sandbox_id, end_at } => {
                Self::SetDeadline { sandbox_id: sandbox_id.clone(), end_at: *end_at }
            }
            Command::Kill { sandbox_id } => Self::Kill { sandbox_id: sandbox_id.clone() },
            Command::WorkspaceWrite { sandbox_id, path, content } => Self::WorkspaceWrite {
                sandbox_id: sandbox_id.clone(),
                path: path.clone(),
                content: content.clone(),
            },
            Command::WorkspaceRead { sandbox_id, path } => {
                Self::WorkspaceRead { sandbox_id: sandbox_id.clone(), path: path.clone() }
            }
            Command::WorkspaceDelete { sandbox_id, path } => {
                Self::WorkspaceDelete { sandbox_id: sandbox_id.clone(), path: path.clone() }
            }
            Command::WorkspaceList { sandbox_id, path } => {
                Self::WorkspaceList { sandbox_id: sandbox_id.clone(), path: path.clone() }
            }
            Command::WorkspaceScan { sandbox_id, upload_url } => {
                Self::WorkspaceScan { sandbox_id: sandbox_id.clone(), upload_url: upload_url.clone() }
            }
            Command::WorkspaceUpload { sandbox_id, plan_url } => {
                Self::WorkspaceUpload { sandbox_id: sandbox_id.clone(), plan_url: plan_url.clone() }
            }
            Command::WorkspaceRestore { sandbox_id, plan_url } => {
                Self::WorkspaceRestore { sandbox_id: sandbox_id.clone(), plan_url: plan_url.clone() }
            }
        }
    }
}

impl From<&CommandEnvelope> for CommandEnvelopeBody {
    fn from(e: &CommandEnvelope) -> Self {
        Self { id: e.id, issued_at: e.issued_at, expires_at: e.expires_at, command: (&e.command).into() }
    }
}

// ---- POST /node/v1/commands/{command_id} ----

/// A command's outcome, by `status`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CompleteCommand {
    Done {
        /// The started process's pid, for `start_process`.
        #[serde(default)]
        pid: Option<u32>,
        /// What the node wants recorded about the result (e.g. a new sandbox's isolation).
        #[serde(default)]
        details: BTreeMap<String, String>,
    },
    Failed {
        message: String,
    },
}

impl From<CompleteCommand> for CommandOutcome {
    fn from(outcome: CompleteCommand) -> Self {
        match outcome {
            CompleteCommand::Done { pid, details } => Self::Done { pid, details },
            CompleteCommand::Failed { message } => Self::Failed { message },
        }
    }
}

// ---- POST /node/v1/heartbeat ----

/// The aggregate `cpu` line of the host's `/proc/stat`, in ticks; a missing column reads 0.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default)]
pub struct ProcStatCpuWire {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

impl From<ProcStatCpuWire> for ProcStatCpu {
    fn from(c: ProcStatCpuWire) -> Self {
        Self {
            user: c.user,
            nice: c.nice,
            system: c.system,
            idle: c.idle,
            iowait: c.iowait,
            irq: c.irq,
            softirq: c.softirq,
            steal: c.steal,
            guest: c.guest,
            guest_nice: c.guest_nice,
        }
    }
}

/// Usage counters of one sandbox, as its node measures them.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SandboxUsageWire {
    #[schema(value_type = String)]
    pub sandbox_id: SandboxId,
    pub cpu_seconds: Option<f64>,
    pub memory_bytes: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    /// The sandbox's CPU quota in cores; absent or `null` when unlimited or unknown.
    #[serde(default)]
    pub cpu_limit_cores: Option<f64>,
}

/// What a node sends every few seconds: its host, and its sandboxes' counters.
#[derive(Debug, Deserialize, ToSchema)]
pub struct HeartbeatRequest {
    /// The daemon connection, 1 to 64 characters.
    #[schema(min_length = 1, max_length = 64)]
    pub connection_id: String,
    /// Unix milliseconds.
    #[schema(value_type = i64)]
    pub observed_at: Timestamp,
    pub cpu: Option<ProcStatCpuWire>,
    pub total_memory_bytes: Option<u64>,
    pub available_memory_bytes: Option<u64>,
    pub available_disk_bytes: Option<u64>,
    pub effective_cpu_cores: Option<f64>,
    #[serde(default)]
    pub sandboxes: Vec<SandboxUsageWire>,
}

impl From<HeartbeatRequest> for Heartbeat {
    fn from(h: HeartbeatRequest) -> Self {
        Self {
            connection_id: h.connection_id,
            observed_at: h.observed_at,
            cpu: h.cpu.map(Into::into),
            total_memory_bytes: h.total_memory_bytes,
            available_memory_bytes: h.available_memory_bytes,
            available_disk_bytes: h.available_disk_bytes,
            effective_cpu_cores: h.effective_cpu_cores,
            sandboxes: h
                .sandboxes
                .into_iter()
                .map(|u| SandboxUsage {
                    sandbox_id: u.sandbox_id,
                    cpu_seconds: u.cpu_seconds,
                    memory_bytes: u.memory_bytes,
                    memory_limit_bytes: u.memory_limit_bytes,
                    cpu_limit_cores: u.cpu_limit_cores,
                })
                .collect(),
        }
    }
}

// ---- POST /node/v1/reports ----

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputStream {
    Stdout,
    Stderr,
}

impl From<OutputStream> for Stream {
    fn from(s: OutputStream) -> Self {
        match s {
            OutputStream::Stdout => Self::Stdout,
            OutputStream::Stderr => Self::Stderr,
        }
    }
}

/// What a node observed, by `type`. Processes are `obs-<n>` (started by Core) or `live-<pid>`
/// (seen running after a gap).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NodeEventWire {
    ProcessStarted {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        #[schema(value_type = String)]
        process: ProcessId,
        pid: u32,
        config: ProcessConfigWire,
        tag: Option<String>,
        /// Unix milliseconds.
        #[schema(value_type = i64)]
        at: Timestamp,
    },
    /// `data` is base64.
    Output {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        #[schema(value_type = String)]
        process: ProcessId,
        stream: OutputStream,
        #[schema(value_type = i64)]
        at: Timestamp,
        data: String,
    },
    ProcessExited {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        #[schema(value_type = String)]
        process: ProcessId,
        exit_code: Option<i32>,
        signal: Option<i32>,
        #[schema(value_type = i64)]
        at: Timestamp,
    },
    /// A new daemon connection took the sandbox over.
    ObservationResumed {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        #[schema(value_type = i64)]
        at: Timestamp,
    },
    /// The node dropped this much of a process's oldest output before sending it.
    OutputDropped {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        #[schema(value_type = String)]
        process: ProcessId,
        bytes: u64,
        chunks: u64,
    },
    /// A process found running that this connection did not see start.
    LiveSeen {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        pid: u32,
        cmd: String,
        args: Vec<String>,
        #[schema(value_type = i64)]
        at: Timestamp,
    },
    /// The node enforced the deadline: every process was killed.
    SandboxExpired {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        #[schema(value_type = i64)]
        at: Timestamp,
    },
    /// The sandbox's init exited though the node did not end it: every process of it ended,
    /// and Core records it killed.
    InitExited {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        #[schema(value_type = i64)]
        at: Timestamp,
    },
    /// How the provider isolates this sandbox (told once, after creation).
    Isolation {
        #[schema(value_type = String)]
        sandbox_id: SandboxId,
        isolation: BTreeMap<String, String>,
    },
}

impl From<NodeEventWire> for NodeEvent {
    fn from(event: NodeEventWire) -> Self {
        use NodeEventWire as W;
        match event {
            W::ProcessStarted { sandbox_id, process, pid, config, tag, at } => {
                Self::ProcessStarted { sandbox_id, process, pid, config: config.into(), tag, at }
            }
            W::Output { sandbox_id, process, stream, at, data } => {
                Self::Output { sandbox_id, process, stream: stream.into(), at, data }
            }
            W::ProcessExited { sandbox_id, process, exit_code, signal, at } => {
                Self::ProcessExited { sandbox_id, process, exit_code, signal, at }
            }
            W::ObservationResumed { sandbox_id, at } => Self::ObservationResumed { sandbox_id, at },
            W::OutputDropped { sandbox_id, process, bytes, chunks } => {
                Self::OutputDropped { sandbox_id, process, bytes, chunks }
            }
            W::LiveSeen { sandbox_id, pid, cmd, args, at } => {
                Self::LiveSeen { sandbox_id, pid, cmd, args, at }
            }
            W::SandboxExpired { sandbox_id, at } => Self::SandboxExpired { sandbox_id, at },
            W::InitExited { sandbox_id, at } => Self::InitExited { sandbox_id, at },
            W::Isolation { sandbox_id, isolation } => Self::Isolation { sandbox_id, isolation },
        }
    }
}

/// One event and its place in the connection's sequence.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SequencedEventWire {
    /// Increases by one per event within a connection, so a retried batch is applied once.
    pub seq: u64,
    pub event: NodeEventWire,
}

/// A batch of events of one daemon connection.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ReportRequest {
    pub connection_id: String,
    pub events: Vec<SequencedEventWire>,
}

impl From<ReportRequest> for Report {
    fn from(r: ReportRequest) -> Self {
        Self {
            connection_id: r.connection_id,
            events: r
                .events
                .into_iter()
                .map(|e| SequencedEvent { seq: e.seq, event: e.event.into() })
                .collect(),
        }
    }
}

// ---- GET /node/v1/sandboxes ----

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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::body::from_object;

    fn read<T: serde::de::DeserializeOwned>(value: Value) -> T {
        let Value::Object(map) = value else { panic!("an object") };
        from_object(map).expect("a valid body")
    }

    fn sandbox() -> SandboxId {
        SandboxId::from_random([7; 16])
    }

    #[test]
    fn commands_serialize_as_the_domain_types() {
        let config = ProcessConfig {
            cmd: "sh".into(),
            args: vec!["-c".into()],
            envs: BTreeMap::from([("A".into(), "1".into())]),
            cwd: None,
        };
        let at = Timestamp::from_unix_millis(1_790_000_000_123);
        let commands = [
            Command::CreateSandbox { sandbox_id: sandbox(), end_at: at, env_vars: BTreeMap::new() },
            Command::StartProcess { sandbox_id: sandbox(), number: 3, config: config.clone(), tag: None },
            Command::StartProcess {
                sandbox_id: sandbox(),
                number: 4,
                config: ProcessConfig { cwd: Some("/w".into()), ..config },
                tag: Some("t".into()),
            },
            Command::Pause { sandbox_id: sandbox() },
            Command::Resume { sandbox_id: sandbox(), end_at: at },
            Command::SetDeadline { sandbox_id: sandbox(), end_at: at },
            Command::Kill { sandbox_id: sandbox() },
        ];
        for command in commands {
            let envelope = CommandEnvelope {
                id: CommandId::from_random([1; 16]),
                issued_at: at,
                expires_at: at,
                command,
            };
            assert_eq!(json!(CommandEnvelopeBody::from(&envelope)), json!(envelope));
        }
    }

    /// What the daemon sends (the domain types, serialized) reads back as the same domain value.
    #[test]
    fn node_bodies_read_as_the_domain_types() {
        let sandbox = sandbox();
        for outcome in [
            CommandOutcome::Done { pid: Some(4), details: BTreeMap::from([("k".into(), "v".into())]) },
            CommandOutcome::Done { pid: None, details: BTreeMap::new() },
            CommandOutcome::Failed { message: "no".into() },
        ] {
            assert_eq!(CommandOutcome::from(read::<CompleteCommand>(json!(outcome))), outcome);
        }
        let heartbeat = Heartbeat {
            connection_id: "c1".into(),
            observed_at: Timestamp::from_unix_millis(5),
            cpu: Some(ProcStatCpu { user: 1, idle: 2, guest_nice: 3, ..ProcStatCpu::default() }),
            total_memory_bytes: Some(10),
            available_memory_bytes: None,
            available_disk_bytes: Some(3),
            effective_cpu_cores: Some(1.5),
            sandboxes: vec![SandboxUsage {
                sandbox_id: sandbox.clone(),
                cpu_seconds: Some(0.5),
                memory_bytes: None,
                memory_limit_bytes: Some(9),
                cpu_limit_cores: None,
            }],
        };
        assert_eq!(Heartbeat::from(read::<HeartbeatRequest>(json!(heartbeat))), heartbeat);
        let at = Timestamp::from_unix_millis(9);
        let process = ProcessId::Observed(1);
        let events = vec![
            NodeEvent::ProcessStarted {
                sandbox_id: sandbox.clone(),
                process,
                pid: 10,
                config: ProcessConfig { cmd: "ls".into(), ..ProcessConfig::default() },
                tag: None,
                at,
            },
            NodeEvent::Output {
                sandbox_id: sandbox.clone(),
                process,
                stream: Stream::Stderr,
                at,
                data: "aGk=".into(),
            },
            NodeEvent::ProcessExited {
                sandbox_id: sandbox.clone(),
                process,
                exit_code: Some(1),
                signal: None,
                at,
            },
            NodeEvent::ObservationResumed { sandbox_id: sandbox.clone(), at },
            NodeEvent::OutputDropped { sandbox_id: sandbox.clone(), process, bytes: 5, chunks: 1 },
            NodeEvent::LiveSeen { sandbox_id: sandbox.clone(), pid: 3, cmd: "x".into(), args: vec![], at },
            NodeEvent::SandboxExpired { sandbox_id: sandbox.clone(), at },
            NodeEvent::InitExited { sandbox_id: sandbox.clone(), at },
            NodeEvent::Isolation {
                sandbox_id: sandbox,
                isolation: BTreeMap::from([("net".into(), "none".into())]),
            },
        ];
        let report = Report {
            connection_id: "c1".into(),
            events: events
                .into_iter()
                .enumerate()
                .map(|(i, event)| SequencedEvent { seq: i as u64 + 1, event })
                .collect(),
        };
        assert_eq!(Report::from(read::<ReportRequest>(json!(report))), report);
    }

    #[test]
    fn a_wrong_typed_field_names_it() {
        let Value::Object(map) = json!({"connection_id": 5, "observed_at": 1}) else { return };
        let err = from_object::<HeartbeatRequest>(map).expect_err("a type error");
        assert_eq!(err.param.as_deref(), Some("connection_id"));
    }
}
