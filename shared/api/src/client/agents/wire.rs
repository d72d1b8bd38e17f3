//! The agents routes' wire: the agent and version objects as the client API shows them, and
//! the request bodies as clients send them (`CreateAgent`, `UpdateAgent`), read into the
//! domain's `AgentFields` (`TryFrom`), whose rules lay a partial `config` section over the
//! current settings (only the settings it names change).

use agentplane_domain::ValidationError;
use agentplane_domain::agent::{
    Agent, AgentFields, AgentVersion, Attachments, AttachmentsPatch, BudgetAction, ClientTool, ConfigPatch,
    Execution, ExecutionPatch, ExperiencePatch, HumanInTheLoop, HumanInTheLoopPatch, empty_schema,
};
use agentplane_domain::ids::AgentId;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::body::{nullable, present};

/// A tool the agent may call: its name, or `{"type": "function", "name": …}` as OpenAI-style
/// clients send it. Names are distinct, 1 to 64 characters, and known to the deployment.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ToolRef {
    Name(String),
    Function {
        #[serde(rename = "type", default)]
        #[schema(nullable = false)]
        kind: Option<String>,
        #[schema(min_length = 1, max_length = 64)]
        name: String,
    },
}

impl ToolRef {
    fn into_name(self) -> String {
        match self {
            Self::Name(name) | Self::Function { name, .. } => name,
        }
    }
}

/// A bare name, or an object whose `name` is one (its other keys are not read).
impl<'de> Deserialize<'de> for ToolRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::String(name) => Ok(Self::Name(name)),
            Value::Object(mut object) => match object.remove("name") {
                Some(Value::String(name)) => {
                    let kind = object.remove("type").and_then(|t| t.as_str().map(str::to_owned));
                    Ok(Self::Function { kind, name })
                }
                _ => Err(de::Error::custom("a tool name")),
            },
            _ => Err(de::Error::custom("a tool name")),
        }
    }
}

/// A `config` section: an object only (serde would also read a struct from an array), read
/// field by field so that a bad setting is named by its path.
fn section<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Section<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for Section<T> {
        type Value = Option<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, deserializer: D2) -> Result<Self::Value, D2::Error> {
            deserializer.deserialize_any(self)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Some)
        }
    }
    deserializer.deserialize_option(Section(std::marker::PhantomData))
}

/// A section that a PATCH may send as `null` (a change of nothing, which is not an empty PATCH):
/// `Some(None)`.
fn nullable_section<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    section(deserializer).map(Some)
}

/// Whether a field was sent at all (whatever its value).
fn sent<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    IgnoredAny::deserialize(deserializer).map(|_| true)
}

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

/// `config.execution` in a request: only the settings given change.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutionInput {
    /// A synchronous turn's ceiling, 1 ms to the deployment's ceiling (600000 unless the
    /// deployment's `AGENT_SYNC_TIMEOUT_MS` says otherwise; a new agent's default).
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 1, maximum = 600000)]
    sync_timeout_ms: Option<u64>,
    /// Session budget in USD; `null` for none.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<f64>, minimum = 0)]
    max_cost_usd: Option<Option<f64>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    budget_action: Option<BudgetActionName>,
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    background_enabled: Option<bool>,
    /// A background run's ceiling, 1 ms to the deployment's ceiling (1800000 unless the
    /// deployment's `AGENT_BACKGROUND_MAX_DURATION_MS` says otherwise; a new agent's default).
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 1, maximum = 1800000)]
    background_max_duration_ms: Option<u64>,
    /// Where a background run's end is delivered when its request names no `callback_url`: an
    /// http(s) URL that deliveries may reach (a public host, or one the deployment allows),
    /// else 400 (`url_not_allowed` for the address).
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    default_callback_url: Option<Option<String>>,
}

impl From<ExecutionInput> for ExecutionPatch {
    fn from(e: ExecutionInput) -> Self {
        Self {
            sync_timeout_ms: e.sync_timeout_ms,
            max_cost_usd: e.max_cost_usd,
            budget_action: e.budget_action.map(Into::into),
            background_enabled: e.background_enabled,
            background_max_duration_ms: e.background_max_duration_ms,
            default_callback_url: e.default_callback_url,
        }
    }
}

/// `config.attachments` in a request: only the settings given change.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachmentsInput {
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    enabled: Option<bool>,
    /// A Document Store bucket registered to the project (Core:
    /// `POST /core/v1/projects/{project_id}/buckets`) that keeps the session files; null: the
    /// deployment's files bucket. A name that is not registered is 400.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    bucket: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 0)]
    max_files: Option<u32>,
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 0)]
    max_file_bytes: Option<u64>,
}

impl From<AttachmentsInput> for AttachmentsPatch {
    fn from(a: AttachmentsInput) -> Self {
        Self {
            enabled: a.enabled,
            bucket: a.bucket,
            max_files: a.max_files,
            max_file_bytes: a.max_file_bytes,
        }
    }
}

/// `config.humanInTheLoop` in a request: only the settings given change.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HumanInTheLoopInput {
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    tool_approvals: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 0)]
    approval_timeout_minutes: Option<u32>,
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    questions_enabled: Option<bool>,
    /// Replaces the whole list when given.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    client_tools: Option<Vec<ClientToolBody>>,
    /// The keys that may answer the actions of this agent's turns: 1 to 20 distinct ids of live
    /// keys of the project; `null` (the default): any key of the project. Another key's answer
    /// is 403 `answer_not_permitted`.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<Vec<String>>, min_items = 1, max_items = 20)]
    answer_key_ids: Option<Option<Vec<agentplane_domain::ApiKeyId>>>,
}

impl From<HumanInTheLoopInput> for HumanInTheLoopPatch {
    fn from(h: HumanInTheLoopInput) -> Self {
        Self {
            tool_approvals: h.tool_approvals,
            approval_timeout_minutes: h.approval_timeout_minutes,
            questions_enabled: h.questions_enabled,
            client_tools: h.client_tools.map(|tools| tools.into_iter().map(ClientTool::from).collect()),
            answer_key_ids: h.answer_key_ids,
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

impl From<ClientToolBody> for ClientTool {
    fn from(t: ClientToolBody) -> Self {
        Self {
            name: t.name,
            description: t.description,
            parameters: t.parameters.unwrap_or_else(empty_schema),
        }
    }
}

/// An agent's settings in a request. A section that is absent or `null` is left as it is.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentConfigInput {
    /// Operational settings, live without a publish.
    #[serde(default, deserialize_with = "section")]
    execution: Option<ExecutionInput>,
    /// Session files; travel with the published version.
    #[serde(default, deserialize_with = "section")]
    attachments: Option<AttachmentsInput>,
    /// Approvals and questions; travel with the published version.
    #[serde(rename = "humanInTheLoop", default, deserialize_with = "section")]
    human_in_the_loop: Option<HumanInTheLoopInput>,
    /// What a chat surface shows; travels with the published version.
    #[serde(default, deserialize_with = "section")]
    experience: Option<ExperienceInput>,
}

impl From<AgentConfigInput> for ConfigPatch {
    fn from(c: AgentConfigInput) -> Self {
        Self {
            execution: c.execution.map(Into::into),
            attachments: c.attachments.map(Into::into),
            human_in_the_loop: c.human_in_the_loop.map(Into::into),
            experience: c.experience.map(Into::into),
        }
    }
}

/// The sections of `config`, as the spec stores an agent's settings.
const SECTIONS: [&str; 4] = ["execution", "attachments", "humanInTheLoop", "experience"];

/// `config.experience` in a request: only the settings given change.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExperienceInput {
    /// The name a chat surface shows (1-100 characters), or null.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 100)]
    display_name: Option<Option<String>>,
    /// The first message a chat surface shows (at most 2000 characters), or null.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, max_length = 2000)]
    greeting: Option<Option<String>>,
    /// At most 8 distinct prompts of 1-200 characters a person may start from.
    #[serde(default, deserialize_with = "present")]
    #[schema(max_items = 8)]
    suggested_prompts: Option<Vec<String>>,
}

impl From<ExperienceInput> for ExperiencePatch {
    fn from(e: ExperienceInput) -> Self {
        Self { display_name: e.display_name, greeting: e.greeting, suggested_prompts: e.suggested_prompts }
    }
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

/// The settings sections a request sent at the top level instead of under `config`, in
/// [`SECTIONS`]' order: a client that still sends them there is told where they go rather than
/// having them ignored.
fn refuse_misplaced(sent: [bool; 4]) -> Result<(), ValidationError> {
    match SECTIONS.iter().zip(sent).find(|(_, sent)| *sent) {
        Some((misplaced, _)) => Err(ValidationError::new(
            *misplaced,
            format!("agent settings live under `config`: send `config.{misplaced}` instead of `{misplaced}`"),
        )),
        None => Ok(()),
    }
}

/// `POST /api/client/v1/agents`: `name` and `model` required, everything else defaulted.
/// Settings live under `config` (a top-level `execution`, `attachments` or `humanInTheLoop` is
/// refused).
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateAgent {
    /// 1 to 128 characters once trimmed.
    #[schema(min_length = 1, max_length = 128)]
    name: String,
    #[schema(min_length = 1, max_length = 128)]
    model: String,
    #[schema(max_length = 32768)]
    instructions: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, max_items = 32)]
    tools: Option<Vec<ToolRef>>,
    /// Model calls per turn, 1 to 50 (default 8).
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 1, maximum = 50)]
    max_steps: Option<u32>,
    #[serde(default, deserialize_with = "section")]
    config: Option<AgentConfigInput>,
    #[serde(default, deserialize_with = "sent")]
    #[schema(ignore)]
    execution: bool,
    #[serde(default, deserialize_with = "sent")]
    #[schema(ignore)]
    attachments: bool,
    #[serde(rename = "humanInTheLoop", default, deserialize_with = "sent")]
    #[schema(ignore)]
    human_in_the_loop: bool,
    #[serde(default, deserialize_with = "sent")]
    #[schema(ignore)]
    experience: bool,
}

impl TryFrom<CreateAgent> for AgentFields {
    type Error = ValidationError;

    fn try_from(body: CreateAgent) -> Result<Self, ValidationError> {
        refuse_misplaced([body.execution, body.attachments, body.human_in_the_loop, body.experience])?;
        Ok(Self {
            name: Some(body.name),
            model: Some(body.model),
            instructions: Some(body.instructions),
            tools: body.tools.map(|tools| tools.into_iter().map(ToolRef::into_name).collect()),
            max_steps: body.max_steps,
            config: body.config.map(ConfigPatch::from),
        })
    }
}

/// `PATCH /api/client/v1/agents/{agent_id}`: at least one field. Every field given replaces
/// the draft's; within a `config` section only the settings named change.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(min_properties = 1)]
pub struct UpdateAgent {
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, min_length = 1, max_length = 128)]
    name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, min_length = 1, max_length = 128)]
    model: Option<String>,
    /// `null` empties the instructions.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, max_length = 32768)]
    instructions: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, max_items = 32)]
    tools: Option<Vec<ToolRef>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 1, maximum = 50)]
    max_steps: Option<u32>,
    #[serde(default, deserialize_with = "nullable_section")]
    #[schema(value_type = Option<AgentConfigInput>)]
    config: Option<Option<AgentConfigInput>>,
    #[serde(default, deserialize_with = "sent")]
    #[schema(ignore)]
    execution: bool,
    #[serde(default, deserialize_with = "sent")]
    #[schema(ignore)]
    attachments: bool,
    #[serde(rename = "humanInTheLoop", default, deserialize_with = "sent")]
    #[schema(ignore)]
    human_in_the_loop: bool,
    #[serde(default, deserialize_with = "sent")]
    #[schema(ignore)]
    experience: bool,
}

impl TryFrom<UpdateAgent> for AgentFields {
    type Error = ValidationError;

    fn try_from(body: UpdateAgent) -> Result<Self, ValidationError> {
        refuse_misplaced([body.execution, body.attachments, body.human_in_the_loop, body.experience])?;
        let config = match body.config {
            Some(Some(config)) => Some(ConfigPatch::from(config)),
            Some(None) => Some(ConfigPatch::default()),
            None => None,
        };
        Ok(Self {
            name: body.name,
            model: body.model,
            instructions: body.instructions,
            tools: body.tools.map(|tools| tools.into_iter().map(ToolRef::into_name).collect()),
            max_steps: body.max_steps,
            config,
        })
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
    use agentplane_domain::agent::new_agent;
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
