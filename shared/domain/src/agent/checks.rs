//! The rules an agent's settings keep, whichever request sets them.

use crate::ceilings::Ceilings;
use crate::{ApiKeyId, ValidationError};

use super::{
    Attachments, Execution, Experience, HumanInTheLoop, MAX_ANSWER_KEYS, MAX_CLIENT_TOOLS,
    MAX_DISPLAY_NAME_CHARS, MAX_GREETING_CHARS, MAX_SUGGESTED_PROMPT_CHARS, MAX_SUGGESTED_PROMPTS,
};

/// `config.attachments.bucket`, when given, is an S3 bucket name (whether the project registered
/// it is the API's check: the domain knows no registrations).
pub(super) fn check_attachments(attachments: &Attachments) -> Result<(), ValidationError> {
    attachments.bucket_name().map(|_| ())
}

/// A display name of 1-100 characters, a greeting of at most 2000, at most 8 distinct,
/// non-blank suggested prompts of at most 200 each.
pub(super) fn check_experience(experience: &Experience) -> Result<(), ValidationError> {
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

/// Client tool names: 1–64 of `a-z A-Z 0-9 _ -` (what model APIs accept), distinct, and not
/// `ask_user`; parameters an object.
pub(super) fn check_human_in_the_loop(hitl: &HumanInTheLoop) -> Result<(), ValidationError> {
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

pub(super) fn check_execution(execution: &Execution, ceilings: &Ceilings) -> Result<(), ValidationError> {
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
