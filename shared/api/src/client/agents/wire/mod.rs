//! The agents routes' wire: the agent and version objects as the client API shows them
//! (here), and the request bodies (`request`).

use agentplane_domain::agent::{Agent, AgentVersion, Attachments, BudgetAction, Execution, HumanInTheLoop};
use agentplane_domain::ids::AgentId;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

mod request;

pub use request::{
    AgentConfigInput, AttachmentsInput, CreateAgent, ExecutionInput, ExperienceInput, HumanInTheLoopInput,
    ToolRef, UpdateAgent,
};

/// What a session does when it reaches its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = BudgetAction)]
pub enum BudgetActionName {
    Pause,
    Stop,
}

impl From<BudgetActionName> for BudgetAction {
    fn from(action: BudgetActionName) -> Self {
        match action {
            BudgetActionName::Pause => Self::Pause,
            BudgetActionName::Stop => Self::Stop,
        }
    }
}

impl From<BudgetAction> for BudgetActionName {
    fn from(action: BudgetAction) -> Self {
        match action {
            BudgetAction::Pause => Self::Pause,
            BudgetAction::Stop => Self::Stop,
        }
    }
}

/// A tool the caller runs in its own page: the model calls it, the turn pauses with a
/// `client_tool` action, and the caller answers the action with the tool's `output`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ClientTool)]
pub struct ClientToolBody {
    /// 1-64 letters, digits, `_` or `-`; not `ask_user`.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
    #[serde(default)]
    #[schema(max_length = 1024)]
    pub description: String,
    /// The arguments as a JSON schema object, offered to the model as is.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub parameters: Option<serde_json::Value>,
}

/// What a chat surface shows of the agent.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Experience)]
pub struct ExperienceBody {
    pub display_name: Option<String>,
    pub greeting: Option<String>,
    pub suggested_prompts: Vec<String>,
}

impl From<&agentplane_domain::agent::Experience> for ExperienceBody {
    fn from(e: &agentplane_domain::agent::Experience) -> Self {
        Self {
            display_name: e.display_name.clone(),
            greeting: e.greeting.clone(),
            suggested_prompts: e.suggested_prompts.clone(),
        }
    }
}

/// Operational settings, read live from the agent (no publish needed).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Execution)]
pub struct ExecutionBody {
    pub sync_timeout_ms: u64,
    /// Session budget in USD; `null` means none.
    pub max_cost_usd: Option<f64>,
    pub budget_action: BudgetActionName,
    pub background_enabled: bool,
    pub background_max_duration_ms: u64,
    pub default_callback_url: Option<String>,
}

impl From<&Execution> for ExecutionBody {
    fn from(e: &Execution) -> Self {
        Self {
            sync_timeout_ms: e.sync_timeout_ms,
            max_cost_usd: e.max_cost_usd,
            budget_action: e.budget_action.into(),
            background_enabled: e.background_enabled,
            background_max_duration_ms: e.background_max_duration_ms,
            default_callback_url: e.default_callback_url.clone(),
        }
    }
}

/// Session files.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Attachments)]
pub struct AttachmentsBody {
    pub enabled: bool,
    pub bucket: Option<String>,
    pub max_files: u32,
    pub max_file_bytes: u64,
}

impl From<&Attachments> for AttachmentsBody {
    fn from(a: &Attachments) -> Self {
        Self {
            enabled: a.enabled,
            bucket: a.bucket.clone(),
            max_files: a.max_files,
            max_file_bytes: a.max_file_bytes,
        }
    }
}

/// Approvals and questions.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = HumanInTheLoop)]
pub struct HumanInTheLoopBody {
    /// Tools that need a person's approval before they run.
    pub tool_approvals: Vec<String>,
    /// Minutes an action waits for an answer; `0` = never expires.
    pub approval_timeout_minutes: u32,
    /// Whether the model may ask the user a question (the `ask_user` tool).
    pub questions_enabled: bool,
    pub client_tools: Vec<ClientToolBody>,
    /// The keys that may answer the actions of this agent's turns; `null`: any key of the
    /// project.
    pub answer_key_ids: Option<Vec<String>>,
}

impl From<&HumanInTheLoop> for HumanInTheLoopBody {
    fn from(h: &HumanInTheLoop) -> Self {
        Self {
            tool_approvals: h.tool_approvals.clone(),
            approval_timeout_minutes: h.approval_timeout_minutes,
            questions_enabled: h.questions_enabled,
            client_tools: h
                .client_tools
                .iter()
                .map(|t| ClientToolBody {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    parameters: Some(t.parameters.clone()),
                })
                .collect(),
            answer_key_ids: h
                .answer_key_ids
                .as_ref()
                .map(|ids| ids.iter().map(ToString::to_string).collect()),
        }
    }
}

/// An agent's settings.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AgentConfig)]
pub struct AgentConfigBody {
    pub execution: ExecutionBody,
    pub attachments: AttachmentsBody,
    #[serde(rename = "humanInTheLoop")]
    pub human_in_the_loop: HumanInTheLoopBody,
    pub experience: ExperienceBody,
}

/// An agent: its editable draft and the number of its newest published version.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Agent)]
pub struct AgentBody {
    #[schema(value_type = String)]
    pub id: AgentId,
    /// Always `agent`.
    #[schema(value_type = String, pattern = "^agent$")]
    pub object: &'static str,
    pub name: String,
    pub model: String,
    pub instructions: String,
    pub tools: Vec<String>,
    pub max_steps: u32,
    pub config: AgentConfigBody,
    /// `null` until the first publish.
    pub latest_version: Option<u32>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub updated_at: i64,
}

impl From<&Agent> for AgentBody {
    fn from(agent: &Agent) -> Self {
        Self {
            id: agent.id,
            object: "agent",
            name: agent.name.as_str().to_owned(),
            model: agent.draft.model.clone(),
            instructions: agent.draft.instructions.clone(),
            tools: agent.draft.tools.clone(),
            max_steps: agent.draft.max_steps,
            config: AgentConfigBody {
                execution: ExecutionBody::from(&agent.execution),
                attachments: AttachmentsBody::from(&agent.draft.attachments),
                human_in_the_loop: HumanInTheLoopBody::from(&agent.draft.human_in_the_loop),
                experience: ExperienceBody::from(&agent.draft.experience),
            },
            latest_version: agent.latest_version,
            created_at: agent.created_at.unix_seconds(),
            updated_at: agent.updated_at.unix_seconds(),
        }
    }
}

/// The settings a version freezes (`execution` is read live from the agent).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AgentVersionConfig)]
pub struct VersionConfigBody {
    pub attachments: AttachmentsBody,
    #[serde(rename = "humanInTheLoop")]
    pub human_in_the_loop: HumanInTheLoopBody,
    pub experience: ExperienceBody,
}

/// A published, immutable version of an agent.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AgentVersion)]
pub struct AgentVersionBody {
    /// Always `agent.version`.
    #[schema(value_type = String, pattern = "^agent\\.version$")]
    pub object: &'static str,
    #[schema(value_type = String)]
    pub agent_id: AgentId,
    /// 1, 2, … in publish order.
    pub version: u32,
    pub model: String,
    pub instructions: String,
    pub tools: Vec<String>,
    pub max_steps: u32,
    pub config: VersionConfigBody,
    /// Unix seconds.
    pub published_at: i64,
}

impl From<&AgentVersion> for AgentVersionBody {
    fn from(version: &AgentVersion) -> Self {
        Self {
            object: "agent.version",
            agent_id: version.agent_id,
            version: version.version,
            model: version.config.model.clone(),
            instructions: version.config.instructions.clone(),
            tools: version.config.tools.clone(),
            max_steps: version.config.max_steps,
            config: VersionConfigBody {
                attachments: AttachmentsBody::from(&version.config.attachments),
                human_in_the_loop: HumanInTheLoopBody::from(&version.config.human_in_the_loop),
                experience: ExperienceBody::from(&version.config.experience),
            },
            published_at: version.published_at.unix_seconds(),
        }
    }
}

/// The page parameters of `GET /agents/{agent_id}/versions`.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct VersionPageParams {
    /// The version number the previous page ended with; a number that is not a version of
    /// this agent answers 404 `cursor_not_found`.
    #[param(minimum = 1)]
    after: Option<u32>,
    /// Page size, 1 to 100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u16>,
    /// `desc` (newest first, the default) or `asc`.
    #[param(pattern = "^(asc|desc)$")]
    order: Option<String>,
}

#[cfg(test)]
mod tests {
    use agentplane_domain::agent::{AgentFields, new_agent};
    use agentplane_domain::{ProjectId, Timestamp};
    use serde_json::{Value, json};

    use super::*;
    use crate::body::from_object;

    #[test]
    fn the_agent_object_keeps_its_shape() {
        let create =
            json!({"name": "a", "model": "m", "config": {"humanInTheLoop": {"tool_approvals": ["x"]}}});
        let request: CreateAgent =
            from_object(create.as_object().cloned().unwrap_or_default()).expect("a create body");
        let fields = AgentFields::try_from(request).expect("valid");
        let id = AgentId::from_random([1; 16]);
        let agent = new_agent(fields, id, ProjectId::from_random([2; 16]), Timestamp::from_unix_millis(0))
            .expect("valid");
        let body = serde_json::to_value(AgentBody::from(&agent)).expect("serializes");
        assert_eq!(body["object"], "agent");
        assert_eq!(body["config"]["execution"]["budget_action"], "pause");
        assert_eq!(body["config"]["execution"]["max_cost_usd"], Value::Null);
        assert_eq!(body["config"]["humanInTheLoop"]["tool_approvals"], json!(["x"]));
        assert_eq!(body["config"]["attachments"]["max_files"], 10);
    }
}
