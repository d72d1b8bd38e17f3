//! A node's report: the events it observed, in the order of its connection's sequence.

use super::*;

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
