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
/// A process's command (`cmd`, `args`, `envs`, `cwd`) together, as the JSON it is stored and
/// sent as: this keeps its queued command and its process record far below DynamoDB's 400 KB
/// item limit, and its argv and environment far below the kernel's.
pub const MAX_PROCESS_COMMAND_BYTES: usize = 64 * 1024;
/// A sandbox's `envVars` together, as JSON: the sandbox's record must always fit one item.
pub const MAX_SANDBOX_ENV_BYTES: usize = 64 * 1024;
/// `PATH_MAX` less its terminating NUL.
pub const MAX_CWD_BYTES: usize = 4095;
/// `NAME_MAX`: the longest component a path may have.
pub const MAX_PATH_COMPONENT_BYTES: usize = 255;
// A sandbox record (metadata, envVars) and a queued command (its config and the sandbox's
// envVars) stay well within one 400 KB DynamoDB item.
const _: () = assert!(MAX_PROCESS_COMMAND_BYTES + MAX_SANDBOX_ENV_BYTES < 400_000 / 2);
/// Metadata keys Agentplane sets itself (e.g. `agentplane.session_id`); clients may not.
pub const RESERVED_METADATA_PREFIX: &str = "agentplane.";

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

/// The bytes `value` takes as JSON.
fn encoded_len(value: &impl serde::Serialize) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |v| v.len())
}

/// `PATH` decides where the command is found: it must name absolute directories (an empty
/// `PATH`, or an empty entry, would mean the working directory).
fn path_ok(value: &str) -> bool {
    value.split(':').all(|dir| dir.starts_with('/'))
}

/// A working directory the kernel can enter: absolute, at most `PATH_MAX` and `NAME_MAX`.
fn working_dir(value: &Value) -> Result<String, ValidationError> {
    let cwd = text("cwd", value, MAX_CWD_BYTES)?;
    if !cwd.starts_with('/') {
        return Err(ValidationError::new("cwd", "`cwd` must be an absolute path"));
    }
    if cwd.len() > MAX_CWD_BYTES {
        return Err(ValidationError::new("cwd", format!("`cwd` may be at most {MAX_CWD_BYTES} bytes")));
    }
    if cwd.split('/').any(|part| part.len() > MAX_PATH_COMPONENT_BYTES) {
        return Err(ValidationError::new(
            "cwd",
            format!("each component of `cwd` may be at most {MAX_PATH_COMPONENT_BYTES} bytes"),
        ));
    }
    Ok(cwd)
}

/// An object of environment variables: names like `[A-Za-z_][A-Za-z0-9_]*`, string values
/// without NUL; `PATH`, when set, is a list of absolute directories.
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
        let value = text(&field, value, MAX_ENV_VALUE_CHARS)?;
        if name == "PATH" && !path_ok(&value) {
            return Err(ValidationError::new(
                field,
                "`PATH` must be a non-empty list of absolute directories separated by `:`",
            ));
        }
        out.insert(name.clone(), value);
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
    if let Some(key) = metadata.as_map().keys().find(|k| reserved_metadata_key(k)) {
        return Err(ValidationError::new(
            format!("metadata.{key}"),
            format!("metadata keys starting with `{RESERVED_METADATA_PREFIX}` are reserved"),
        ));
    }
    let env_vars = env_vars("envVars", body.get("envVars"))?;
    if encoded_len(&env_vars) > MAX_SANDBOX_ENV_BYTES {
        return Err(ValidationError::new(
            "envVars",
            format!("`envVars` may take at most {MAX_SANDBOX_ENV_BYTES} bytes as JSON"),
        ));
    }
    Ok(CreateSandbox { timeout_s, metadata, env_vars })
}

/// Whether a metadata key is one Agentplane keeps for itself (in any letter case).
pub fn reserved_metadata_key(key: &str) -> bool {
    key.get(..RESERVED_METADATA_PREFIX.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(RESERVED_METADATA_PREFIX))
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
        Some(v) => Some(working_dir(v)?),
    };
    let tag = match body.get("tag") {
        None | Some(Value::Null) => None,
        Some(v) => Some(text("tag", v, MAX_TAG_CHARS)?),
    };
    let config = ProcessConfig { cmd, args, envs, cwd };
    if encoded_len(&config) > MAX_PROCESS_COMMAND_BYTES {
        return Err(ValidationError::body(format!(
            "`cmd`, `args`, `envs` and `cwd` together may take at most {MAX_PROCESS_COMMAND_BYTES} bytes as JSON"
        )));
    }
    Ok(StartProcess { config, tag })
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

    #[test]
    fn a_large_command_within_the_limit_is_accepted_and_one_past_it_refused() {
        // 7 arguments of 9,000 bytes: 63,000 bytes of argument text, within 64 KiB as JSON.
        let args: Vec<String> = (0..7).map(|_| "a".repeat(9_000)).collect();
        let p = start_process(&obj(json!({"cmd": "echo", "args": args}))).expect("within the limit");
        assert_eq!(p.config.args.len(), 7);
        let args: Vec<String> = (0..8).map(|_| "a".repeat(9_000)).collect();
        let err = start_process(&obj(json!({"cmd": "echo", "args": args}))).expect_err("past the limit");
        assert!(err.message.contains("65536"), "{}", err.message);
        // Escapes count as what they take: 12,000 control characters are 72,000 bytes of JSON.
        let err = start_process(&obj(json!({"cmd": "echo", "args": ["\u{1}".repeat(12_000)]})));
        assert!(err.is_err());
        // envs count too.
        let envs: Map<String, Value> = (0..20).map(|i| (format!("V{i}"), json!("v".repeat(4_000)))).collect();
        assert!(start_process(&obj(json!({"cmd": "echo", "envs": envs}))).is_err());
    }

    #[test]
    fn cwd_must_be_an_absolute_path_the_kernel_accepts() {
        for bad in [
            json!("rel/dir"),
            json!(""),
            json!("/work\u{0}space"),
            json!(format!("/{}", "d".repeat(4095))),
            json!(format!("/{}", "d".repeat(256))),
            json!(7),
        ] {
            assert_eq!(
                start_process(&obj(json!({"cmd": "ls", "cwd": bad.clone()}))).map_err(|e| e.param),
                Err(Some("cwd".into())),
                "{bad}"
            );
        }
        let deep = format!("/{}", vec!["d".repeat(255); 15].join("/"));
        assert!(deep.len() <= MAX_CWD_BYTES);
        assert!(start_process(&obj(json!({"cmd": "ls", "cwd": deep}))).is_ok());
        assert!(start_process(&obj(json!({"cmd": "ls", "cwd": "/workspace/does/not/exist"}))).is_ok());
    }

    #[test]
    fn env_names_and_path_are_checked() {
        for bad in [
            json!({"A=B": "x"}),
            json!({"": "x"}),
            json!({"PATH": ""}),
            json!({"PATH": "/bin\u{0}"}),
            json!({"PATH": "/usr/bin:"}),
            json!({"PATH": "bin:/usr/bin"}),
            json!({"X": "a\u{0}b"}),
        ] {
            assert!(start_process(&obj(json!({"cmd": "ls", "envs": bad.clone()}))).is_err(), "{bad}");
            assert!(create_sandbox(&obj(json!({"envVars": bad.clone()}))).is_err(), "{bad}");
        }
        let ok = start_process(&obj(json!({"cmd": "ls", "envs": {"PATH": "/usr/bin:/bin", "EMPTY": ""}})));
        assert!(ok.is_ok());
    }

    #[test]
    fn sandbox_env_vars_are_bounded_as_a_whole() {
        let many: Map<String, Value> = (0..17).map(|i| (format!("V{i}"), json!("v".repeat(4_000)))).collect();
        assert!(create_sandbox(&obj(json!({"envVars": many}))).is_err());
        let some: Map<String, Value> = (0..15).map(|i| (format!("V{i}"), json!("v".repeat(4_000)))).collect();
        assert!(create_sandbox(&obj(json!({"envVars": some}))).is_ok());
    }

    #[test]
    fn agentplane_metadata_keys_are_reserved() {
        for key in ["agentplane.session_id", "agentplane.anything", "AgentPlane.Session_Id"] {
            let err = create_sandbox(&obj(json!({"metadata": {key: "x"}}))).expect_err(key);
            assert_eq!(err.param, Some(format!("metadata.{key}")));
        }
        for key in ["agentplane", "agentplanex.y", "my.agentplane.key", "a"] {
            assert!(create_sandbox(&obj(json!({"metadata": {key: "x"}}))).is_ok(), "{key}");
        }
        assert!(reserved_metadata_key(crate::sandbox::SESSION_METADATA_KEY));
    }
}
