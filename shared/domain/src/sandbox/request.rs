//! Validation of sandbox API request bodies. Each returns a `ValidationError` naming the field.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::ProcessConfig;
use super::lifecycle::{CREATE_TIMEOUT_DEFAULT_S, CREATE_TIMEOUT_MAX_S, TimeoutSeconds};
use crate::ValidationError;
use crate::metadata::Metadata;

pub const MAX_ENV_VARS: usize = 64;
pub const MAX_ENV_VALUE_CHARS: usize = 4096;
pub const MAX_ARGS: usize = 256;
pub const MAX_ARG_CHARS: usize = 16 * 1024;
pub const MAX_TAG_CHARS: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateSandbox {
    pub timeout_s: i64,
    pub metadata: Metadata,
    pub env_vars: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartProcess {
    pub config: ProcessConfig,
    pub tag: Option<String>,
}

fn integer(param: &str, value: &Value) -> Result<i64, ValidationError> {
    value.as_i64().ok_or_else(|| ValidationError::new(param, format!("`{param}` must be an integer")))
}

fn text(param: &str, value: &Value, max: usize) -> Result<String, ValidationError> {
    match value {
        Value::String(s) if s.contains('\0') => {
            Err(ValidationError::new(param, format!("`{param}` may not contain NUL")))
        }
        Value::String(s) if s.chars().count() <= max => Ok(s.clone()),
        Value::String(_) => {
            Err(ValidationError::new(param, format!("`{param}` may be at most {max} characters")))
        }
        _ => Err(ValidationError::new(param, format!("`{param}` must be a string"))),
    }
}

fn env_name_ok(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && name.len() <= 256
}

/// An object of environment variables: names like `[A-Za-z_][A-Za-z0-9_]*`, string values.
pub fn env_vars(param: &str, value: Option<&Value>) -> Result<BTreeMap<String, String>, ValidationError> {
    let map = match value {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(ValidationError::new(param, format!("`{param}` must be an object"))),
    };
    if map.len() > MAX_ENV_VARS {
        return Err(ValidationError::new(
            param,
            format!("`{param}` may have at most {MAX_ENV_VARS} entries"),
        ));
    }
    let mut out = BTreeMap::new();
    for (name, value) in map {
        let field = format!("{param}.{name}");
        if !env_name_ok(name) {
            return Err(ValidationError::new(
                field,
                "environment variable names must match [A-Za-z_][A-Za-z0-9_]*",
            ));
        }
        out.insert(name.clone(), text(&field, value, MAX_ENV_VALUE_CHARS)?);
    }
    Ok(out)
}

pub fn create_sandbox(body: &Map<String, Value>) -> Result<CreateSandbox, ValidationError> {
    let timeout_s = match body.get("timeout") {
        None | Some(Value::Null) => CREATE_TIMEOUT_DEFAULT_S,
        Some(v) => integer("timeout", v)?,
    };
    if !(1..=CREATE_TIMEOUT_MAX_S).contains(&timeout_s) {
        return Err(ValidationError::new(
            "timeout",
            format!("`timeout` must be between 1 and {CREATE_TIMEOUT_MAX_S} seconds"),
        ));
    }
    let metadata = Metadata::from_json("metadata", body.get("metadata").unwrap_or(&Value::Null))?;
    let env_vars = env_vars("envVars", body.get("envVars"))?;
    Ok(CreateSandbox { timeout_s, metadata, env_vars })
}

pub fn set_timeout(body: &Map<String, Value>) -> Result<TimeoutSeconds, ValidationError> {
    let value = body
        .get("timeout")
        .ok_or_else(|| ValidationError::new("timeout", "`timeout` is required (900, 1800 or 3600)"))?;
    let seconds = integer("timeout", value)?;
    TimeoutSeconds::new(seconds)
        .ok_or_else(|| ValidationError::new("timeout", "`timeout` must be 900, 1800 or 3600 seconds"))
}

pub fn start_process(body: &Map<String, Value>) -> Result<StartProcess, ValidationError> {
    let cmd = text("cmd", body.get("cmd").unwrap_or(&Value::Null), MAX_ARG_CHARS)?;
    if cmd.trim().is_empty() {
        return Err(ValidationError::new("cmd", "`cmd` may not be empty"));
    }
    let args = match body.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.len() <= MAX_ARGS => items
            .iter()
            .enumerate()
            .map(|(i, v)| text(&format!("args[{i}]"), v, MAX_ARG_CHARS))
            .collect::<Result<_, _>>()?,
        Some(Value::Array(_)) => {
            return Err(ValidationError::new("args", format!("`args` may have at most {MAX_ARGS} items")));
        }
        Some(_) => return Err(ValidationError::new("args", "`args` must be an array of strings")),
    };
    let envs = env_vars("envs", body.get("envs"))?;
    let cwd = match body.get("cwd") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let cwd = text("cwd", v, 4096)?;
            if !cwd.starts_with('/') {
                return Err(ValidationError::new("cwd", "`cwd` must be an absolute path"));
            }
            Some(cwd)
        }
    };
    let tag = match body.get("tag") {
        None | Some(Value::Null) => None,
        Some(v) => Some(text("tag", v, MAX_TAG_CHARS)?),
    };
    Ok(StartProcess { config: ProcessConfig { cmd, args, envs, cwd }, tag })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[allow(clippy::needless_pass_by_value)]
    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn create_defaults_and_bounds() {
        let c = create_sandbox(&Map::new()).expect("defaults");
        assert_eq!(c.timeout_s, 300);
        assert!(create_sandbox(&obj(json!({"timeout": 0}))).is_err());
        assert!(create_sandbox(&obj(json!({"timeout": "60"}))).is_err());
        assert!(create_sandbox(&obj(json!({"envVars": {"1BAD": "x"}}))).is_err());
        assert!(create_sandbox(&obj(json!({"envVars": {"OK": 1}}))).is_err());
        let c = create_sandbox(&obj(json!({"timeout": 60, "envVars": {"A_1": "x"}}))).expect("valid");
        assert_eq!(c.env_vars.get("A_1").map(String::as_str), Some("x"));
    }

    #[test]
    fn timeout_accepts_only_the_three_values() {
        assert_eq!(set_timeout(&obj(json!({"timeout": 1800}))).map(|t| t.seconds()), Ok(1800));
        for bad in [json!({}), json!({"timeout": 60}), json!({"timeout": 900.5}), json!({"timeout": "900"})] {
            assert!(set_timeout(&obj(bad.clone())).is_err(), "{bad}");
        }
    }

    #[test]
    fn process_bodies_are_checked_field_by_field() {
        assert_eq!(start_process(&Map::new()).map_err(|e| e.param), Err(Some("cmd".into())));
        assert!(start_process(&obj(json!({"cmd": ""}))).is_err());
        assert!(start_process(&obj(json!({"cmd": "ls", "args": [1]}))).is_err());
        assert!(start_process(&obj(json!({"cmd": "ls", "cwd": "rel"}))).is_err());
        let p = start_process(&obj(json!({"cmd": "ls", "args": ["-l"], "tag": "t", "cwd": "/workspace"})))
            .expect("valid");
        assert_eq!(p.config.args, vec!["-l".to_owned()]);
        assert_eq!(p.tag.as_deref(), Some("t"));
    }
}
