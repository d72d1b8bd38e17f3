//! Create and PATCH requests, typed: the fields a request gives ([`AgentFields`]), read into an
//! [`Agent`] and checked section by section. Within a `config` section only the settings given
//! change ([`ExecutionPatch`] and its siblings lay themselves over the current settings); a
//! nullable setting given as `null` is cleared (`Some(None)`).

use super::checks::{check_attachments, check_execution, check_experience, check_human_in_the_loop};
use super::*;

/// The `config.execution` settings a request gives.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecutionPatch {
    pub sync_timeout_ms: Option<u64>,
    pub max_cost_usd: Option<Option<f64>>,
    pub budget_action: Option<BudgetAction>,
    pub background_enabled: Option<bool>,
    pub background_max_duration_ms: Option<u64>,
    pub default_callback_url: Option<Option<String>>,
}

impl ExecutionPatch {
    /// `current` with the settings given laid over it.
    pub fn over(self, current: &Execution) -> Execution {
        Execution {
            sync_timeout_ms: self.sync_timeout_ms.unwrap_or(current.sync_timeout_ms),
            max_cost_usd: self.max_cost_usd.unwrap_or(current.max_cost_usd),
            budget_action: self.budget_action.unwrap_or(current.budget_action),
            background_enabled: self.background_enabled.unwrap_or(current.background_enabled),
            background_max_duration_ms: self
                .background_max_duration_ms
                .unwrap_or(current.background_max_duration_ms),
            default_callback_url: self
                .default_callback_url
                .unwrap_or_else(|| current.default_callback_url.clone()),
        }
    }
}

/// The `config.attachments` settings a request gives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttachmentsPatch {
    pub enabled: Option<bool>,
    pub bucket: Option<Option<String>>,
    pub max_files: Option<u32>,
    pub max_file_bytes: Option<u64>,
}

impl AttachmentsPatch {
    /// `current` with the settings given laid over it.
    pub fn over(self, current: &Attachments) -> Attachments {
        Attachments {
            enabled: self.enabled.unwrap_or(current.enabled),
            bucket: self.bucket.unwrap_or_else(|| current.bucket.clone()),
            max_files: self.max_files.unwrap_or(current.max_files),
            max_file_bytes: self.max_file_bytes.unwrap_or(current.max_file_bytes),
        }
    }
}

/// The `config.humanInTheLoop` settings a request gives (a list given replaces the whole list).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HumanInTheLoopPatch {
    pub tool_approvals: Option<Vec<String>>,
    pub approval_timeout_minutes: Option<u32>,
    pub questions_enabled: Option<bool>,
    pub client_tools: Option<Vec<ClientTool>>,
    pub answer_key_ids: Option<Option<Vec<ApiKeyId>>>,
}

impl HumanInTheLoopPatch {
    /// `current` with the settings given laid over it.
    pub fn over(self, current: &HumanInTheLoop) -> HumanInTheLoop {
        HumanInTheLoop {
            tool_approvals: self.tool_approvals.unwrap_or_else(|| current.tool_approvals.clone()),
            approval_timeout_minutes: self
                .approval_timeout_minutes
                .unwrap_or(current.approval_timeout_minutes),
            questions_enabled: self.questions_enabled.unwrap_or(current.questions_enabled),
            client_tools: self.client_tools.unwrap_or_else(|| current.client_tools.clone()),
            answer_key_ids: self.answer_key_ids.unwrap_or_else(|| current.answer_key_ids.clone()),
        }
    }
}

/// The `config.experience` settings a request gives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExperiencePatch {
    pub display_name: Option<Option<String>>,
    pub greeting: Option<Option<String>>,
    pub suggested_prompts: Option<Vec<String>>,
}

impl ExperiencePatch {
    /// `current` with the settings given laid over it.
    pub fn over(self, current: &Experience) -> Experience {
        Experience {
            display_name: self.display_name.unwrap_or_else(|| current.display_name.clone()),
            greeting: self.greeting.unwrap_or_else(|| current.greeting.clone()),
            suggested_prompts: self.suggested_prompts.unwrap_or_else(|| current.suggested_prompts.clone()),
        }
    }
}

/// The `config` sections a request gives; an absent (or `null`) section is left as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigPatch {
    pub execution: Option<ExecutionPatch>,
    pub attachments: Option<AttachmentsPatch>,
    pub human_in_the_loop: Option<HumanInTheLoopPatch>,
    pub experience: Option<ExperiencePatch>,
}

/// What a create or PATCH request gives, each field as sent (`None`: not given). The tools
/// are the names the request lists, in its order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentFields {
    pub name: Option<String>,
    pub model: Option<String>,
    /// `Some(None)`: `null`, which empties the instructions.
    pub instructions: Option<Option<String>>,
    pub tools: Option<Vec<String>>,
    pub max_steps: Option<u32>,
    /// `Some` when the request has `config`, even `null` (a PATCH of only `config: null` is a
    /// change of nothing, not an empty PATCH).
    pub config: Option<ConfigPatch>,
}

fn check_model(model: &str) -> Result<(), ValidationError> {
    if model.trim().is_empty() {
        return Err(ValidationError::new("model", "`model` must not be empty"));
    }
    if model.chars().count() > MAX_MODEL_CHARS {
        return Err(ValidationError::new(
            "model",
            format!("`model` may be at most {MAX_MODEL_CHARS} characters"),
        ));
    }
    Ok(())
}

fn check_instructions(instructions: &str) -> Result<(), ValidationError> {
    if instructions.chars().count() > MAX_INSTRUCTIONS_CHARS {
        return Err(ValidationError::new(
            "instructions",
            format!("`instructions` may be at most {MAX_INSTRUCTIONS_CHARS} characters"),
        ));
    }
    Ok(())
}

fn check_tools(tools: &[String]) -> Result<(), ValidationError> {
    if tools.len() > MAX_TOOLS {
        return Err(ValidationError::new("tools", format!("at most {MAX_TOOLS} tools")));
    }
    for (i, name) in tools.iter().enumerate() {
        if name.is_empty() || name.len() > 64 || tools[..i].contains(name) {
            return Err(ValidationError::new(
                format!("tools[{i}]"),
                "each tool must be a distinct tool name",
            ));
        }
    }
    Ok(())
}

fn check_max_steps(steps: u32) -> Result<(), ValidationError> {
    if !(1..=MAX_STEPS_CEILING).contains(&steps) {
        return Err(ValidationError::new(
            "max_steps",
            format!("`max_steps` must be an integer from 1 to {MAX_STEPS_CEILING}"),
        ));
    }
    Ok(())
}

/// A create request: `name` and `model` required, everything else defaulted, under the spec's
/// ceilings.
pub fn new_agent(
    fields: AgentFields,
    id: AgentId,
    project_id: ProjectId,
    now: Timestamp,
) -> Result<Agent, ValidationError> {
    new_agent_within(fields, id, project_id, now, &Ceilings::default())
}

/// [`new_agent`] under a deployment's `ceilings`: its Execution settings are bounded by them
/// and default to them.
pub fn new_agent_within(
    fields: AgentFields,
    id: AgentId,
    project_id: ProjectId,
    now: Timestamp,
    ceilings: &Ceilings,
) -> Result<Agent, ValidationError> {
    let name = match &fields.name {
        Some(name) => Name::new("name", name)?,
        None => return Err(ValidationError::new("name", "`name` is required")),
    };
    let model = fields.model.ok_or_else(|| ValidationError::new("model", "`model` is required"))?;
    check_model(&model)?;
    let instructions = fields.instructions.flatten().unwrap_or_default();
    check_instructions(&instructions)?;
    let tools = fields.tools.unwrap_or_default();
    check_tools(&tools)?;
    let max_steps = fields.max_steps.unwrap_or(DEFAULT_MAX_STEPS);
    check_max_steps(max_steps)?;
    let config = fields.config.unwrap_or_default();
    let defaults = Execution::within(ceilings);
    let execution = config.execution.unwrap_or_default().over(&defaults);
    check_execution(&execution, ceilings)?;
    let draft = VersionedConfig {
        model,
        instructions,
        tools,
        max_steps,
        attachments: config.attachments.unwrap_or_default().over(&Attachments::default()),
        human_in_the_loop: config.human_in_the_loop.unwrap_or_default().over(&HumanInTheLoop::default()),
        experience: config.experience.unwrap_or_default().over(&Experience::default()),
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
/// section only the settings it names change. Nothing changes unless all of it is valid.
pub fn patch_agent(agent: &mut Agent, fields: AgentFields, now: Timestamp) -> Result<(), ValidationError> {
    patch_agent_within(agent, fields, now, &Ceilings::default())
}

/// [`patch_agent`] under a deployment's `ceilings`.
pub fn patch_agent_within(
    agent: &mut Agent,
    fields: AgentFields,
    now: Timestamp,
    ceilings: &Ceilings,
) -> Result<(), ValidationError> {
    let AgentFields { name, model, instructions, tools, max_steps, config } = fields;
    let given = name.is_some()
        || model.is_some()
        || instructions.is_some()
        || tools.is_some()
        || max_steps.is_some()
        || config.is_some();
    if !given {
        return Err(ValidationError::body(
            "give at least one of: name, model, instructions, tools, max_steps, config",
        ));
    }
    let mut changed = agent.clone();
    if let Some(name) = name {
        changed.name = Name::new("name", &name)?;
    }
    if let Some(model) = model {
        check_model(&model)?;
        changed.draft.model = model;
    }
    if let Some(instructions) = instructions {
        let instructions = instructions.unwrap_or_default();
        check_instructions(&instructions)?;
        changed.draft.instructions = instructions;
    }
    if let Some(tools) = tools {
        check_tools(&tools)?;
        changed.draft.tools = tools;
    }
    if let Some(steps) = max_steps {
        check_max_steps(steps)?;
        changed.draft.max_steps = steps;
    }
    let config = config.unwrap_or_default();
    if let Some(patch) = config.execution {
        let execution = patch.over(&changed.execution);
        // A value saved under a higher ceiling stays valid (a turn is held to the deployment's
        // ceiling anyway), so that other settings can still be changed.
        let bounds = Ceilings {
            sync_ms: ceilings.sync_ms.max(changed.execution.sync_timeout_ms),
            background_ms: ceilings.background_ms.max(changed.execution.background_max_duration_ms),
        };
        check_execution(&execution, &bounds)?;
        changed.execution = execution;
    }
    if let Some(patch) = config.attachments {
        let attachments = patch.over(&changed.draft.attachments);
        check_attachments(&attachments)?;
        changed.draft.attachments = attachments;
    }
    if let Some(patch) = config.human_in_the_loop {
        let hitl = patch.over(&changed.draft.human_in_the_loop);
        check_human_in_the_loop(&hitl)?;
        changed.draft.human_in_the_loop = hitl;
    }
    if let Some(patch) = config.experience {
        let experience = patch.over(&changed.draft.experience);
        check_experience(&experience)?;
        changed.draft.experience = experience;
    }
    changed.updated_at = now;
    *agent = changed;
    Ok(())
}
