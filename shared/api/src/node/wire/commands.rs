//! The commands a node polls for and the outcomes it answers them with.

use super::*;

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
        /// The sandbox's envd access token; absent: not reachable through envd.
        #[serde(skip_serializing_if = "Option::is_none")]
        envd_access_token: Option<String>,
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
            Command::CreateSandbox { sandbox_id, end_at, env_vars, envd_access_token } => {
                Self::CreateSandbox {
                    sandbox_id: sandbox_id.clone(),
                    end_at: *end_at,
                    env_vars: env_vars.clone(),
                    envd_access_token: envd_access_token.clone(),
                }
            }
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
