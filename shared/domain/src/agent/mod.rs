//! Agents: a mutable draft config and immutable published versions. `execution` is operational
//! and read live from the agent; everything else travels with the version that runs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bucket::BucketName;
use crate::ceilings::Ceilings;
use crate::ids::AgentId;
use crate::project::Name;
use crate::{ApiKeyId, ProjectId, Timestamp, ValidationError};

mod checks;
mod request;

pub use request::{
    AgentFields, AttachmentsPatch, ConfigPatch, ExecutionPatch, ExperiencePatch, HumanInTheLoopPatch,
    new_agent, new_agent_within, patch_agent, patch_agent_within,
};

pub const MAX_MODEL_CHARS: usize = 128;
pub const MAX_INSTRUCTIONS_CHARS: usize = 32_768;
pub const MAX_TOOLS: usize = 32;
pub const MAX_STEPS_CEILING: u32 = 50;
pub const DEFAULT_MAX_STEPS: u32 = 8;
/// The spec's synchronous call ceiling, 600 s: the deployment's unless `AGENT_SYNC_TIMEOUT_MS`
/// raises or lowers it (see [`crate::ceilings`]); an agent can only lower it.
pub const SYNC_TIMEOUT_CEILING_MS: u64 = crate::ceilings::SYNC_DEFAULT_MS;
/// The spec's background run ceiling, 30 min (`AGENT_BACKGROUND_MAX_DURATION_MS`).
pub const BACKGROUND_CEILING_MS: u64 = crate::ceilings::BACKGROUND_DEFAULT_MS;
/// The most key ids `humanInTheLoop.answer_key_ids` may name.
pub const MAX_ANSWER_KEYS: usize = 20;

/// Operational settings, read from the live agent (no publish needed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Execution {
    pub sync_timeout_ms: u64,
    /// Session budget in USD; `None` means no budget.
    pub max_cost_usd: Option<f64>,
    pub budget_action: BudgetAction,
    pub background_enabled: bool,
    pub background_max_duration_ms: u64,
    pub default_callback_url: Option<String>,
}

impl Default for Execution {
    fn default() -> Self {
        Self::within(&Ceilings::default())
    }
}

impl Execution {
    /// A new agent's settings under a deployment's ceilings: it runs as long as they allow.
    pub fn within(ceilings: &Ceilings) -> Self {
        Self {
            sync_timeout_ms: ceilings.sync_ms,
            max_cost_usd: None,
            budget_action: BudgetAction::Pause,
            background_enabled: false,
            background_max_duration_ms: ceilings.background_ms,
            default_callback_url: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetAction {
    Pause,
    Stop,
}

/// Session files (travel with the version).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Attachments {
    pub enabled: bool,
    pub bucket: Option<String>,
    pub max_files: u32,
    pub max_file_bytes: u64,
}

impl Default for Attachments {
    fn default() -> Self {
        Self { enabled: false, bucket: None, max_files: 10, max_file_bytes: 20 * 1024 * 1024 }
    }
}

impl Attachments {
    /// The Document Store bucket files go to; `None`: the deployment's files bucket.
    pub fn bucket_name(&self) -> Result<Option<BucketName>, ValidationError> {
        self.bucket.as_deref().map(|name| BucketName::parse("config.attachments.bucket", name)).transpose()
    }
}

/// Approvals and questions (travel with the version).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HumanInTheLoop {
    /// Tools that need a person's approval before they run.
    pub tool_approvals: Vec<String>,
    /// Minutes an action waits for an answer; `0` = never expires.
    pub approval_timeout_minutes: u32,
    /// Whether the model is offered the `ask_user` tool (a question pauses the turn).
    pub questions_enabled: bool,
    /// Tools that run in the caller's page: the model calls them, the turn pauses, the caller
    /// runs the tool and answers its `output`.
    pub client_tools: Vec<ClientTool>,
    /// Who may answer the actions of this agent's turns: `None` (the default, and what stored
    /// versions from before read as) any key of the project; otherwise these keys only.
    pub answer_key_ids: Option<Vec<ApiKeyId>>,
}

impl Default for HumanInTheLoop {
    fn default() -> Self {
        Self {
            tool_approvals: Vec::new(),
            approval_timeout_minutes: 1440,
            questions_enabled: false,
            client_tools: Vec::new(),
            answer_key_ids: None,
        }
    }
}

/// What a chat surface shows of the agent (travels with the version): the name it goes by,
/// the greeting it opens with, and prompts a person may start from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Experience {
    pub display_name: Option<String>,
    pub greeting: Option<String>,
    pub suggested_prompts: Vec<String>,
}

pub const MAX_DISPLAY_NAME_CHARS: usize = 100;
pub const MAX_GREETING_CHARS: usize = 2000;
pub const MAX_SUGGESTED_PROMPTS: usize = 8;
pub const MAX_SUGGESTED_PROMPT_CHARS: usize = 200;

/// The most client tools an agent declares.
pub const MAX_CLIENT_TOOLS: usize = 32;

/// A tool declared by the agent and run by the caller: a name, what it does, and its arguments
/// as a JSON schema (an object), offered to the model as is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "empty_schema")]
    pub parameters: Value,
}

/// The parameters of a client tool that declares none: an object schema with no properties.
pub fn empty_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// What a published version freezes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionedConfig {
    pub model: String,
    pub instructions: String,
    pub tools: Vec<String>,
    pub max_steps: u32,
    pub attachments: Attachments,
    #[serde(rename = "humanInTheLoop")]
    pub human_in_the_loop: HumanInTheLoop,
    /// Stored versions from before experience settings read as none.
    #[serde(default)]
    pub experience: Experience,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    pub id: AgentId,
    pub project_id: ProjectId,
    pub name: Name,
    pub draft: VersionedConfig,
    pub execution: Execution,
    /// The newest published version number; `None` until the first publish.
    pub latest_version: Option<u32>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentVersion {
    pub agent_id: AgentId,
    pub version: u32,
    pub config: VersionedConfig,
    pub published_at: Timestamp,
}

/// Which config a turn runs: the draft, or a published version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Draft,
    Published,
}
