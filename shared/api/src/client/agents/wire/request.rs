//! The agents routes' request bodies as clients send them (`CreateAgent`, `UpdateAgent`), read
//! into the domain's `AgentFields` (`TryFrom`), whose rules lay a partial `config` section over
//! the current settings (only the settings it names change).

use agentplane_domain::ValidationError;
use agentplane_domain::agent::{
    AgentFields, AttachmentsPatch, ClientTool, ConfigPatch, ExecutionPatch, ExperiencePatch,
    HumanInTheLoopPatch, empty_schema,
};
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{BudgetActionName, ClientToolBody};
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
