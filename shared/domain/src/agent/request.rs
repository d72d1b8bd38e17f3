//! Create and PATCH requests: the JSON body read into an [`Agent`], checked section by section.

use serde_json::{Map, Value};

use super::checks::{check_attachments, check_execution, check_experience, check_human_in_the_loop};
use super::*;

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
