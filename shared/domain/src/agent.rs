//! Agents: a mutable draft config and immutable published versions. `execution` is operational
//! and read live from the agent; everything else travels with the version that runs.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::bucket::BucketName;
use crate::ceilings::Ceilings;
use crate::ids::AgentId;
use crate::project::Name;
use crate::{ApiKeyId, ProjectId, Timestamp, ValidationError};

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

/// A display name of 1-100 characters, a greeting of at most 2000, at most 8 distinct,
/// non-blank suggested prompts of at most 200 each.
/// `config.attachments.bucket`, when given, is an S3 bucket name (whether the project registered
/// it is the API's check: the domain knows no registrations).
fn check_attachments(attachments: &Attachments) -> Result<(), ValidationError> {
    attachments.bucket_name().map(|_| ())
}

fn check_experience(experience: &Experience) -> Result<(), ValidationError> {
    const P: &str = "config.experience";
    if let Some(name) = &experience.display_name
        && (name.trim().is_empty() || name.chars().count() > MAX_DISPLAY_NAME_CHARS)
    {
        return Err(ValidationError::new(
            format!("{P}.display_name"),
            format!("`{P}.display_name` must be 1 to {MAX_DISPLAY_NAME_CHARS} characters, or null"),
        ));
    }
    if experience.greeting.as_ref().is_some_and(|g| g.chars().count() > MAX_GREETING_CHARS) {
        return Err(ValidationError::new(
            format!("{P}.greeting"),
            format!("`{P}.greeting` may be at most {MAX_GREETING_CHARS} characters"),
        ));
    }
    if experience.suggested_prompts.len() > MAX_SUGGESTED_PROMPTS {
        return Err(ValidationError::new(
            format!("{P}.suggested_prompts"),
            format!("at most {MAX_SUGGESTED_PROMPTS} suggested prompts"),
        ));
    }
    for (i, prompt) in experience.suggested_prompts.iter().enumerate() {
        let param = format!("{P}.suggested_prompts[{i}]");
        if prompt.trim().is_empty() || prompt.chars().count() > MAX_SUGGESTED_PROMPT_CHARS {
            return Err(ValidationError::new(
                param,
                format!("a suggested prompt is 1 to {MAX_SUGGESTED_PROMPT_CHARS} characters, not blank"),
            ));
        }
        if experience.suggested_prompts[..i].contains(prompt) {
            return Err(ValidationError::new(param, "suggested prompts must be distinct"));
        }
    }
    Ok(())
}

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

fn empty_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// Client tool names: 1–64 of `a-z A-Z 0-9 _ -` (what model APIs accept), distinct, and not
/// `ask_user`; parameters an object.
fn check_human_in_the_loop(hitl: &HumanInTheLoop) -> Result<(), ValidationError> {
    check_answer_keys(hitl.answer_key_ids.as_deref())?;
    if hitl.client_tools.len() > MAX_CLIENT_TOOLS {
        return Err(ValidationError::new(
            "config.humanInTheLoop.client_tools",
            format!("at most {MAX_CLIENT_TOOLS} client tools"),
        ));
    }
    for (i, tool) in hitl.client_tools.iter().enumerate() {
        let param = format!("config.humanInTheLoop.client_tools[{i}]");
        let valid_name = (1..=64).contains(&tool.name.len())
            && tool.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid_name {
            return Err(ValidationError::new(
                format!("{param}.name"),
                "a client tool's name is 1-64 letters, digits, `_` or `-`",
            ));
        }
        if tool.name == crate::action::ASK_USER_TOOL
            || hitl.client_tools[..i].iter().any(|t| t.name == tool.name)
        {
            return Err(ValidationError::new(
                format!("{param}.name"),
                format!("the client tool name `{}` is taken", tool.name),
            ));
        }
        if tool.description.chars().count() > 1024 {
            return Err(ValidationError::new(
                format!("{param}.description"),
                "a client tool's description may be at most 1024 characters",
            ));
        }
        if !tool.parameters.is_object() {
            return Err(ValidationError::new(
                format!("{param}.parameters"),
                "`parameters` must be a JSON schema object",
            ));
        }
    }
    Ok(())
}

/// `answer_key_ids`: `null`, or 1 to [`MAX_ANSWER_KEYS`] distinct key ids (their form is checked
/// as they are read; whether they are the project's keys is the API's check).
fn check_answer_keys(ids: Option<&[ApiKeyId]>) -> Result<(), ValidationError> {
    const P: &str = "config.humanInTheLoop.answer_key_ids";
    let Some(ids) = ids else { return Ok(()) };
    if ids.is_empty() || ids.len() > MAX_ANSWER_KEYS {
        return Err(ValidationError::new(
            P,
            format!(
                "`{P}` names 1 to {MAX_ANSWER_KEYS} key ids, or is null (any key of the project may answer)"
            ),
        ));
    }
    if let Some(i) = (1..ids.len()).find(|&i| ids[..i].contains(&ids[i])) {
        return Err(ValidationError::new(format!("{P}[{i}]"), "the key ids must be distinct"));
    }
    Ok(())
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

fn string_field(
    body: &Map<String, Value>,
    field: &str,
    max: usize,
    required: bool,
) -> Result<Option<String>, ValidationError> {
    match body.get(field) {
        None | Some(Value::Null) if required => {
            Err(ValidationError::new(field, format!("`{field}` is required")))
        }
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if required && s.trim().is_empty() => {
            Err(ValidationError::new(field, format!("`{field}` must not be empty")))
        }
        Some(Value::String(s)) if s.chars().count() > max => {
            Err(ValidationError::new(field, format!("`{field}` may be at most {max} characters")))
        }
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ValidationError::new(field, format!("`{field}` must be a string"))),
    }
}

/// The sections of `config`, as the spec stores an agent's settings.
const SECTIONS: [&str; 4] = ["execution", "attachments", "humanInTheLoop", "experience"];

/// The `config` object of a request, if any. Its keys must be known sections, and the sections
/// are no longer read at the top level: a client that still sends them there is told where
/// they go rather than having them ignored.
fn config(body: &Map<String, Value>) -> Result<Option<&Map<String, Value>>, ValidationError> {
    if let Some(misplaced) = SECTIONS.iter().find(|s| body.contains_key(**s)) {
        return Err(ValidationError::new(
            *misplaced,
            format!("agent settings live under `config`: send `config.{misplaced}` instead of `{misplaced}`"),
        ));
    }
    match body.get("config") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(config)) => {
            if let Some(unknown) = config.keys().find(|k| !SECTIONS.contains(&k.as_str())) {
                return Err(ValidationError::new(
                    format!("config.{unknown}"),
                    format!("unknown setting `config.{unknown}`; known: {}", SECTIONS.join(", ")),
                ));
            }
            Ok(Some(config))
        }
        Some(_) => Err(ValidationError::new("config", "`config` must be an object")),
    }
}

/// `config.{field}` laid over `current`: only the fields it names change. `None` when the
/// section is absent (or null).
fn section<T>(
    current: &T,
    config: Option<&Map<String, Value>>,
    field: &str,
) -> Result<Option<T>, ValidationError>
where
    T: Serialize + serde::de::DeserializeOwned,
{
    let param = format!("config.{field}");
    let given = match config.and_then(|c| c.get(field)) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(given)) => given,
        // Serde would also read a struct from an array; only an object is a section.
        Some(_) => return Err(ValidationError::new(&param, format!("`{param}` must be an object"))),
    };
    let invalid = |e: serde_json::Error| ValidationError::new(&param, format!("`{param}` is invalid: {e}"));
    let mut merged = match serde_json::to_value(current).map_err(invalid)? {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    merged.extend(given.iter().map(|(k, v)| (k.clone(), v.clone())));
    serde_json::from_value(Value::Object(merged)).map(Some).map_err(invalid)
}

fn tools(body: &Map<String, Value>) -> Result<Option<Vec<String>>, ValidationError> {
    let Some(value) = body.get("tools") else { return Ok(None) };
    let Value::Array(items) = value else {
        return Err(ValidationError::new("tools", "`tools` must be an array of tool names"));
    };
    if items.len() > MAX_TOOLS {
        return Err(ValidationError::new("tools", format!("at most {MAX_TOOLS} tools")));
    }
    let mut names = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        // A bare name, or `{"type":"function","name":…}` as OpenAI-style clients send it.
        let name = match item {
            Value::String(s) => Some(s.as_str()),
            Value::Object(o) => o.get("name").and_then(Value::as_str),
            _ => None,
        };
        match name {
            Some(n) if !n.is_empty() && n.len() <= 64 && !names.iter().any(|x: &String| x == n) => {
                names.push(n.to_owned())
            }
            _ => {
                return Err(ValidationError::new(
                    format!("tools[{i}]"),
                    "each tool must be a distinct tool name",
                ));
            }
        }
    }
    Ok(Some(names))
}

fn max_steps(body: &Map<String, Value>) -> Result<Option<u32>, ValidationError> {
    match body.get("max_steps") {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=u64::from(MAX_STEPS_CEILING)).contains(&n) => Ok(Some(n as u32)),
            _ => Err(ValidationError::new(
                "max_steps",
                format!("`max_steps` must be an integer from 1 to {MAX_STEPS_CEILING}"),
            )),
        },
    }
}

fn check_execution(execution: &Execution, ceilings: &Ceilings) -> Result<(), ValidationError> {
    if !(1..=ceilings.sync_ms).contains(&execution.sync_timeout_ms) {
        return Err(ValidationError::new(
            "config.execution.sync_timeout_ms",
            format!("must be from 1 to {} (the deployment's ceiling)", ceilings.sync_ms),
        ));
    }
    if !(1..=ceilings.background_ms).contains(&execution.background_max_duration_ms) {
        return Err(ValidationError::new(
            "config.execution.background_max_duration_ms",
            format!("must be from 1 to {} (the deployment's ceiling)", ceilings.background_ms),
        ));
    }
    if let Some(url) = &execution.default_callback_url {
        crate::webhook::check_url_as("config.execution.default_callback_url", url)?;
    }
    if execution.max_cost_usd.is_some_and(|c| crate::pricing::usd_amount(c) != Some(c)) {
        return Err(ValidationError::new(
            "config.execution.max_cost_usd",
            "must be a number of USD from 0 to 1000000000 (to the nano-dollar), or null",
        ));
    }
    Ok(())
}

/// A create request: `name` and `model` required, everything else defaulted, under the spec's
/// ceilings.
pub fn new_agent(
    body: &Map<String, Value>,
    id: AgentId,
    project_id: ProjectId,
    now: Timestamp,
) -> Result<Agent, ValidationError> {
    new_agent_within(body, id, project_id, now, &Ceilings::default())
}

/// [`new_agent`] under a deployment's `ceilings`: its Execution settings are bounded by them
/// and default to them.
pub fn new_agent_within(
    body: &Map<String, Value>,
    id: AgentId,
    project_id: ProjectId,
    now: Timestamp,
    ceilings: &Ceilings,
) -> Result<Agent, ValidationError> {
    let name = Name::from_json("name", body.get("name"))?;
    let model = string_field(body, "model", MAX_MODEL_CHARS, true)?.unwrap_or_default();
    let config = config(body)?;
    let defaults = Execution::within(ceilings);
    let execution = section(&defaults, config, "execution")?.unwrap_or(defaults);
    check_execution(&execution, ceilings)?;
    let draft = VersionedConfig {
        model,
        instructions: string_field(body, "instructions", MAX_INSTRUCTIONS_CHARS, false)?.unwrap_or_default(),
        tools: tools(body)?.unwrap_or_default(),
        max_steps: max_steps(body)?.unwrap_or(DEFAULT_MAX_STEPS),
        attachments: section(&Attachments::default(), config, "attachments")?.unwrap_or_default(),
        human_in_the_loop: section(&HumanInTheLoop::default(), config, "humanInTheLoop")?.unwrap_or_default(),
        experience: section(&Experience::default(), config, "experience")?.unwrap_or_default(),
    };
    check_attachments(&draft.attachments)?;
    check_human_in_the_loop(&draft.human_in_the_loop)?;
    check_experience(&draft.experience)?;
    Ok(Agent {
        id,
        project_id,
        name,
        draft,
        execution,
        latest_version: None,
        created_at: now,
        updated_at: now,
    })
}

/// A PATCH of the draft: every given field replaces the current one; within a `config`
/// section only the settings it names change.
pub fn patch_agent(
    agent: &mut Agent,
    body: &Map<String, Value>,
    now: Timestamp,
) -> Result<(), ValidationError> {
    patch_agent_within(agent, body, now, &Ceilings::default())
}

/// [`patch_agent`] under a deployment's `ceilings`.
pub fn patch_agent_within(
    agent: &mut Agent,
    body: &Map<String, Value>,
    now: Timestamp,
    ceilings: &Ceilings,
) -> Result<(), ValidationError> {
    const FIELDS: [&str; 6] = ["name", "model", "instructions", "tools", "max_steps", "config"];
    let config = config(body)?;
    if !body.keys().any(|k| FIELDS.contains(&k.as_str())) {
        return Err(ValidationError::body(
            "give at least one of: name, model, instructions, tools, max_steps, config",
        ));
    }
    if body.contains_key("name") {
        agent.name = Name::from_json("name", body.get("name"))?;
    }
    if let Some(model) = string_field(body, "model", MAX_MODEL_CHARS, body.contains_key("model"))? {
        agent.draft.model = model;
    }
    if body.contains_key("instructions") {
        agent.draft.instructions =
            string_field(body, "instructions", MAX_INSTRUCTIONS_CHARS, false)?.unwrap_or_default();
    }
    if let Some(tools) = tools(body)? {
        agent.draft.tools = tools;
    }
    if let Some(steps) = max_steps(body)? {
        agent.draft.max_steps = steps;
    }
    if let Some(execution) = section(&agent.execution, config, "execution")? {
        // A value saved under a higher ceiling stays valid (a turn is held to the deployment's
        // ceiling anyway), so that other settings can still be changed.
        let bounds = Ceilings {
            sync_ms: ceilings.sync_ms.max(agent.execution.sync_timeout_ms),
            background_ms: ceilings.background_ms.max(agent.execution.background_max_duration_ms),
        };
        check_execution(&execution, &bounds)?;
        agent.execution = execution;
    }
    if let Some(attachments) = section(&agent.draft.attachments, config, "attachments")? {
        check_attachments(&attachments)?;
        agent.draft.attachments = attachments;
    }
    if let Some(hitl) = section(&agent.draft.human_in_the_loop, config, "humanInTheLoop")? {
        check_human_in_the_loop(&hitl)?;
        agent.draft.human_in_the_loop = hitl;
    }
    if let Some(experience) = section(&agent.draft.experience, config, "experience")? {
        check_experience(&experience)?;
        agent.draft.experience = experience;
    }
    agent.updated_at = now;
    Ok(())
}

#[cfg(test)]
mod experience_tests {
    use serde_json::json;

    use super::*;

    #[allow(clippy::needless_pass_by_value)]
    fn create(config: Value) -> Result<Agent, ValidationError> {
        let body = json!({"name": "a", "model": "m", "config": config});
        let body = body.as_object().cloned().unwrap_or_default();
        new_agent(
            &body,
            AgentId::from_random([1; 16]),
            ProjectId::from_random([2; 16]),
            Timestamp::from_unix_seconds(1),
        )
    }

    #[test]
    fn experience_settings_are_validated_and_patched_field_by_field() {
        let agent = create(
            json!({"experience": {"display_name": "Ada", "greeting": "Hi!", "suggested_prompts": ["One", "Two"]}}),
        );
        let mut agent = agent.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(agent.draft.experience.display_name.as_deref(), Some("Ada"));
        assert_eq!(agent.draft.experience.suggested_prompts, ["One", "Two"]);
        let bad = |config: Value| create(config).err().and_then(|e| e.param);
        assert_eq!(
            bad(json!({"experience": {"display_name": " "}})).as_deref(),
            Some("config.experience.display_name")
        );
        assert_eq!(
            bad(json!({"experience": {"greeting": "x".repeat(2001)}})).as_deref(),
            Some("config.experience.greeting")
        );
        assert_eq!(
            bad(json!({"experience": {"suggested_prompts": vec!["a"; 9]}})).as_deref(),
            Some("config.experience.suggested_prompts")
        );
        assert_eq!(
            bad(json!({"experience": {"suggested_prompts": ["a", "a"]}})).as_deref(),
            Some("config.experience.suggested_prompts[1]")
        );
        assert_eq!(
            bad(json!({"experience": {"suggested_prompts": [""]}})).as_deref(),
            Some("config.experience.suggested_prompts[0]")
        );
        assert_eq!(bad(json!({"experience": {"colour": "red"}})).as_deref(), Some("config.experience"));
        // A PATCH changes only what it names.
        let patch = json!({"config": {"experience": {"greeting": "Hello"}}});
        patch_agent(&mut agent, patch.as_object().unwrap_or(&Map::new()), Timestamp::from_unix_seconds(2))
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(agent.draft.experience.greeting.as_deref(), Some("Hello"));
        assert_eq!(agent.draft.experience.display_name.as_deref(), Some("Ada"));
        // A stored version from before experience reads as none.
        let old: VersionedConfig = serde_json::from_value(json!({
            "model": "m", "instructions": "", "tools": [], "max_steps": 8,
            "attachments": Attachments::default(), "humanInTheLoop": HumanInTheLoop::default(),
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(old.experience, Experience::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    fn make(v: Value) -> Result<Agent, ValidationError> {
        new_agent(
            &body(v),
            AgentId::from_random([1; 16]),
            ProjectId::from_random([2; 16]),
            Timestamp::from_unix_millis(0),
        )
    }

    #[test]
    fn defaults_follow_the_spec() {
        let agent = make(json!({"name": "a", "model": "m"})).expect("valid");
        assert_eq!(agent.execution.sync_timeout_ms, 600_000);
        assert_eq!(agent.execution.background_max_duration_ms, 1_800_000);
        assert_eq!(agent.draft.attachments.max_files, 10);
        assert_eq!(agent.draft.attachments.max_file_bytes, 20 * 1024 * 1024);
        assert_eq!(agent.draft.human_in_the_loop.approval_timeout_minutes, 1440);
        assert_eq!(agent.latest_version, None);
    }

    #[test]
    fn a_bucket_is_an_s3_bucket_name_or_refused() {
        let err = make(json!({"name": "a", "model": "m", "config": {"attachments": {"enabled": true, "bucket": "Mine!"}}}))
            .err()
            .and_then(|e| e.param);
        assert_eq!(err.as_deref(), Some("config.attachments.bucket"));
        let mut agent = make(json!({"name": "a", "model": "m"})).expect("valid");
        let patch = body(json!({"config": {"attachments": {"bucket": "a..b"}}}));
        assert!(patch_agent(&mut agent, &patch, Timestamp::from_unix_millis(1)).is_err());
        assert_eq!(agent.draft.attachments.bucket, None);
        let patch = body(json!({"config": {"attachments": {"bucket": "team-docs"}}}));
        assert!(patch_agent(&mut agent, &patch, Timestamp::from_unix_millis(1)).is_ok());
        let name = agent.draft.attachments.bucket_name().expect("valid").expect("named");
        assert_eq!(name.as_str(), "team-docs");
        assert!(
            make(json!({"name": "a", "model": "m", "config": {"attachments": {"bucket": null}}})).is_ok()
        );
    }

    #[test]
    fn the_sync_timeout_can_only_be_lowered() {
        assert!(
            make(json!({"name": "a", "model": "m", "config": {"execution": {"sync_timeout_ms": 600_001}}}))
                .is_err()
        );
        let agent =
            make(json!({"name": "a", "model": "m", "config": {"execution": {"sync_timeout_ms": 5000}}}))
                .expect("valid");
        assert_eq!(agent.execution.sync_timeout_ms, 5000);
    }

    #[test]
    fn a_default_callback_url_follows_the_webhook_url_rules() {
        let param = |url: Value| {
            make(json!({"name": "a", "model": "m", "config": {"execution": {"default_callback_url": url}}}))
                .err()
                .and_then(|e| e.param)
        };
        for bad in
            ["ftp://example.com/hook", "example.com/hook", "http://user:pw@example.com/", "http://x/#f"]
        {
            assert_eq!(param(json!(bad)).as_deref(), Some("config.execution.default_callback_url"), "{bad}");
        }
        assert_eq!(param(json!("https://hooks.example.com/run")), None);
        assert_eq!(param(Value::Null), None);
        let mut agent = make(json!({"name": "a", "model": "m"})).expect("valid");
        let patch = body(json!({"config": {"execution": {"default_callback_url": "gopher://x"}}}));
        assert!(patch_agent(&mut agent, &patch, Timestamp::from_unix_millis(1)).is_err());
        assert_eq!(agent.execution.default_callback_url, None);
    }

    #[test]
    fn who_may_answer_is_any_key_or_a_short_list_of_distinct_key_ids() {
        let key = |n: u8| ApiKeyId::from_random([n; 16]).to_string();
        let hitl = |ids: Value| {
            make(json!({"name": "a", "model": "m", "config": {"humanInTheLoop": {"answer_key_ids": ids}}}))
        };
        assert_eq!(
            make(json!({"name": "a", "model": "m"})).expect("valid").draft.human_in_the_loop.answer_key_ids,
            None
        );
        let agent = hitl(json!([key(1), key(2)])).expect("valid");
        assert_eq!(
            agent.draft.human_in_the_loop.answer_key_ids,
            Some(vec![ApiKeyId::from_random([1; 16]), ApiKeyId::from_random([2; 16])])
        );
        assert_eq!(hitl(Value::Null).expect("valid").draft.human_in_the_loop.answer_key_ids, None);
        let param = |ids: Value| hitl(ids).err().and_then(|e| e.param);
        let p = "config.humanInTheLoop.answer_key_ids";
        assert_eq!(param(json!([])).as_deref(), Some(p));
        let many: Vec<String> = (0..=MAX_ANSWER_KEYS as u8).map(key).collect();
        assert_eq!(param(json!(many)).as_deref(), Some(p));
        assert_eq!(
            param(json!([key(1), key(1)])).as_deref(),
            Some("config.humanInTheLoop.answer_key_ids[1]")
        );
        // Malformed ids are refused as they are read.
        assert_eq!(param(json!(["cpeer_abc"])).as_deref(), Some("config.humanInTheLoop"));
        assert_eq!(param(json!([key(0xab).to_uppercase()])).as_deref(), Some("config.humanInTheLoop"));
        // Versions stored before the setting read as any key.
        let old: HumanInTheLoop =
            serde_json::from_value(json!({"tool_approvals": ["add"], "approval_timeout_minutes": 5}))
                .expect("an old stored shape");
        assert_eq!(old.answer_key_ids, None);
    }

    #[test]
    fn execution_settings_are_bounded_by_the_deployments_ceilings() {
        let raised = Ceilings { sync_ms: 840_000, background_ms: 7_200_000 };
        let create = |execution: Value, ceilings: &Ceilings| {
            new_agent_within(
                &body(json!({"name": "a", "model": "m", "config": {"execution": execution}})),
                AgentId::from_random([1; 16]),
                ProjectId::from_random([2; 16]),
                Timestamp::from_unix_millis(0),
                ceilings,
            )
        };
        // A new agent runs as long as the deployment allows.
        let agent = create(json!({}), &raised).expect("valid");
        assert_eq!(
            (agent.execution.sync_timeout_ms, agent.execution.background_max_duration_ms),
            (840_000, 7_200_000)
        );
        assert!(
            create(json!({"sync_timeout_ms": 700_000, "background_max_duration_ms": 3_600_000}), &raised)
                .is_ok()
        );
        assert!(create(json!({"sync_timeout_ms": 840_001}), &raised).is_err());
        assert!(create(json!({"background_max_duration_ms": 7_200_001}), &raised).is_err());
        // Lowered: only up to it.
        let lowered = Ceilings { sync_ms: 30_000, background_ms: 60_000 };
        assert!(create(json!({"sync_timeout_ms": 30_001}), &lowered).is_err());
        let mut agent = create(json!({}), &raised).expect("valid");
        // A value saved under a higher ceiling does not block changing other settings.
        let patch = body(json!({"config": {"execution": {"budget_action": "stop"}}}));
        assert!(patch_agent_within(&mut agent, &patch, Timestamp::from_unix_millis(1), &lowered).is_ok());
        let patch = body(json!({"config": {"execution": {"sync_timeout_ms": 840_001}}}));
        assert!(patch_agent_within(&mut agent, &patch, Timestamp::from_unix_millis(2), &lowered).is_err());
    }

    #[test]
    fn bad_fields_name_themselves() {
        let param = |v| make(v).err().and_then(|e| e.param);
        assert_eq!(param(json!({"name": "a"})).as_deref(), Some("model"));
        assert_eq!(param(json!({"name": "a", "model": 1})).as_deref(), Some("model"));
        assert_eq!(param(json!({"name": "a", "model": "m", "tools": "x"})).as_deref(), Some("tools"));
        assert_eq!(
            param(json!({"name": "a", "model": "m", "tools": ["a", "a"]})).as_deref(),
            Some("tools[1]")
        );
        assert_eq!(param(json!({"name": "a", "model": "m", "max_steps": 0})).as_deref(), Some("max_steps"));
        assert_eq!(
            param(json!({"name": "a", "model": "m", "config": {"execution": {"nope": 1}}})).as_deref(),
            Some("config.execution")
        );
        assert_eq!(
            param(json!({"name": "a", "model": "m", "config": {"humanInTheLoop": []}})).as_deref(),
            Some("config.humanInTheLoop")
        );
        assert_eq!(
            param(json!({"name": "a", "model": "m", "config": {"appearance": {}}})).as_deref(),
            Some("config.appearance")
        );
        assert_eq!(param(json!({"name": "a", "model": "m", "config": 1})).as_deref(), Some("config"));
        // The sections are read under `config` only; at the top level they are refused, not ignored.
        assert_eq!(
            param(json!({"name": "a", "model": "m", "execution": {"sync_timeout_ms": 5}})).as_deref(),
            Some("execution")
        );
    }

    #[test]
    fn a_patch_replaces_only_what_it_names() {
        let mut agent = make(json!({"name": "a", "model": "m", "instructions": "be brief"})).expect("valid");
        patch_agent(&mut agent, &body(json!({"model": "m2"})), Timestamp::from_unix_millis(5))
            .expect("valid");
        assert_eq!(agent.draft.model, "m2");
        assert_eq!(agent.draft.instructions, "be brief");
        assert!(patch_agent(&mut agent, &body(json!({})), Timestamp::from_unix_millis(6)).is_err());
        assert!(
            patch_agent(&mut agent, &body(json!({"model": null})), Timestamp::from_unix_millis(6)).is_err()
        );
    }

    #[test]
    fn a_config_patch_changes_only_the_settings_it_names() {
        let mut agent = make(json!({"name": "a", "model": "m", "config": {
            "execution": {"sync_timeout_ms": 5000, "max_cost_usd": 2.5},
            "humanInTheLoop": {"tool_approvals": ["add"]},
        }}))
        .expect("valid");
        let patch = json!({"config": {"execution": {"budget_action": "stop"}}});
        patch_agent(&mut agent, &body(patch), Timestamp::from_unix_millis(5)).expect("valid");
        assert_eq!(agent.execution.budget_action, BudgetAction::Stop);
        assert_eq!(agent.execution.sync_timeout_ms, 5000);
        assert_eq!(agent.execution.max_cost_usd, Some(2.5));
        assert_eq!(agent.draft.human_in_the_loop.tool_approvals, ["add"]);

        let patch = json!({"config": {"execution": {"max_cost_usd": null}}});
        patch_agent(&mut agent, &body(patch), Timestamp::from_unix_millis(6)).expect("valid");
        assert_eq!(agent.execution.max_cost_usd, None);
        assert_eq!(agent.execution.sync_timeout_ms, 5000);

        let bad = json!({"config": {"execution": {"sync_timeout_ms": 0}}});
        assert!(patch_agent(&mut agent, &body(bad), Timestamp::from_unix_millis(7)).is_err());
    }
}
