//! The rules of sandbox API request bodies beyond their JSON types (the API checks those):
//! limits, names and paths. Each refusal is a `ValidationError` naming the field.

use std::collections::BTreeMap;

use serde_json::Value;

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

fn text(param: &str, value: &str, max: usize) -> Result<(), ValidationError> {
    if value.contains('\0') {
        return Err(ValidationError::new(param, format!("`{param}` may not contain NUL")));
    }
    if value.chars().count() > max {
        return Err(ValidationError::new(param, format!("`{param}` may be at most {max} characters")));
    }
    Ok(())
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
fn working_dir(cwd: &str) -> Result<(), ValidationError> {
    text("cwd", cwd, MAX_CWD_BYTES)?;
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
    Ok(())
}

/// Environment variables: at most 64, names like `[A-Za-z_][A-Za-z0-9_]*`, values without NUL;
/// `PATH`, when set, is a list of absolute directories.
pub fn env_vars(
    param: &str,
    vars: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ValidationError> {
    if vars.len() > MAX_ENV_VARS {
        return Err(ValidationError::new(
            param,
            format!("`{param}` may have at most {MAX_ENV_VARS} entries"),
        ));
    }
    for (name, value) in &vars {
        let field = format!("{param}.{name}");
        if !env_name_ok(name) {
            return Err(ValidationError::new(
                field,
                "environment variable names must match [A-Za-z_][A-Za-z0-9_]*",
            ));
        }
        text(&field, value, MAX_ENV_VALUE_CHARS)?;
        if name == "PATH" && !path_ok(value) {
            return Err(ValidationError::new(
                field,
                "`PATH` must be a non-empty list of absolute directories separated by `:`",
            ));
        }
    }
    Ok(vars)
}

/// `POST /sandboxes` once its JSON types are checked: `timeout` (default 300), `metadata` and
/// `envVars` (absent or null: none).
pub fn create_sandbox(
    timeout: Option<i64>,
    metadata: Option<BTreeMap<String, String>>,
    env_vars: Option<BTreeMap<String, String>>,
) -> Result<CreateSandbox, ValidationError> {
    let timeout_s = timeout.unwrap_or(CREATE_TIMEOUT_DEFAULT_S);
    if !(1..=CREATE_TIMEOUT_MAX_S).contains(&timeout_s) {
        return Err(ValidationError::new(
            "timeout",
            format!("`timeout` must be between 1 and {CREATE_TIMEOUT_MAX_S} seconds"),
        ));
    }
    let metadata = match metadata {
        None => Metadata::default(),
        Some(map) => Metadata::from_json(
            "metadata",
            &Value::Object(map.into_iter().map(|(k, v)| (k, Value::String(v))).collect()),
        )?,
    };
    if let Some(key) = metadata.as_map().keys().find(|k| reserved_metadata_key(k)) {
        return Err(ValidationError::new(
            format!("metadata.{key}"),
            format!("metadata keys starting with `{RESERVED_METADATA_PREFIX}` are reserved"),
        ));
    }
    let env_vars = self::env_vars("envVars", env_vars.unwrap_or_default())?;
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

/// `POST /sandboxes/{id}/timeout`'s `timeout`.
pub fn set_timeout(seconds: i64) -> Result<TimeoutSeconds, ValidationError> {
    TimeoutSeconds::new(seconds)
        .ok_or_else(|| ValidationError::new("timeout", "`timeout` must be 900, 1800 or 3600 seconds"))
}

/// `POST /sandboxes/{id}/processes` once its JSON types are checked (`args`, `envs`, `cwd` and
/// `tag` absent or null: none).
pub fn start_process(
    cmd: String,
    args: Option<Vec<String>>,
    envs: Option<BTreeMap<String, String>>,
    cwd: Option<String>,
    tag: Option<String>,
) -> Result<StartProcess, ValidationError> {
    text("cmd", &cmd, MAX_ARG_CHARS)?;
    if cmd.trim().is_empty() {
        return Err(ValidationError::new("cmd", "`cmd` may not be empty"));
    }
    let args = args.unwrap_or_default();
    if args.len() > MAX_ARGS {
        return Err(ValidationError::new("args", format!("`args` may have at most {MAX_ARGS} items")));
    }
    for (i, arg) in args.iter().enumerate() {
        text(&format!("args[{i}]"), arg, MAX_ARG_CHARS)?;
    }
    let envs = env_vars("envs", envs.unwrap_or_default())?;
    if let Some(cwd) = &cwd {
        working_dir(cwd)?;
    }
    if let Some(tag) = &tag {
        text("tag", tag, MAX_TAG_CHARS)?;
    }
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
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn sized(n: usize, value: &str) -> BTreeMap<String, String> {
        (0..n).map(|i| (format!("V{i}"), value.to_owned())).collect()
    }

    fn start(cmd: &str) -> Result<StartProcess, ValidationError> {
        start_process(cmd.to_owned(), None, None, None, None)
    }

    fn with_cwd(cwd: &str) -> Result<StartProcess, ValidationError> {
        start_process("ls".into(), None, None, Some(cwd.to_owned()), None)
    }

    fn with_envs(envs: BTreeMap<String, String>) -> Result<StartProcess, ValidationError> {
        start_process("ls".into(), None, Some(envs), None, None)
    }

    fn with_args(args: Vec<String>) -> Result<StartProcess, ValidationError> {
        start_process("echo".into(), Some(args), None, None, None)
    }

    #[test]
    fn create_defaults_and_bounds() {
        let c = create_sandbox(None, None, None).expect("defaults");
        assert_eq!(c.timeout_s, 300);
        for bad in [0, -1, 3601] {
            assert_eq!(
                create_sandbox(Some(bad), None, None).map_err(|e| e.param),
                Err(Some("timeout".into()))
            );
        }
        assert!(create_sandbox(None, None, Some(map(&[("1BAD", "x")]))).is_err());
        let c = create_sandbox(Some(60), None, Some(map(&[("A_1", "x")]))).expect("valid");
        assert_eq!(c.env_vars.get("A_1").map(String::as_str), Some("x"));
    }

    #[test]
    fn metadata_keeps_its_bounds() {
        assert!(create_sandbox(None, Some(map(&[("a", &"x".repeat(513))])), None).is_err());
        assert!(create_sandbox(None, Some(sized(17, "v")), None).is_err());
        let c = create_sandbox(None, Some(map(&[("a", "b")])), None).expect("valid");
        assert_eq!(c.metadata.as_map().get("a").map(String::as_str), Some("b"));
    }

    #[test]
    fn timeout_accepts_only_the_three_values() {
        assert_eq!(set_timeout(1800).map(|t| t.seconds()), Ok(1800));
        for bad in [0, 60, 899, 3601, -900] {
            assert_eq!(set_timeout(bad).map_err(|e| e.param), Err(Some("timeout".into())), "{bad}");
        }
    }

    #[test]
    fn process_bodies_are_checked_field_by_field() {
        assert_eq!(start("").map_err(|e| e.param), Err(Some("cmd".into())));
        assert_eq!(start("  ").map_err(|e| e.param), Err(Some("cmd".into())));
        assert_eq!(start("l\0s").map_err(|e| e.param), Err(Some("cmd".into())));
        assert_eq!(
            with_args(vec!["ok".into(), "a\0".into()]).map_err(|e| e.param),
            Err(Some("args[1]".into()))
        );
        assert_eq!(with_args(vec![String::new(); 257]).map_err(|e| e.param), Err(Some("args".into())));
        assert!(with_cwd("rel").is_err());
        let tag = start_process("ls".into(), None, None, None, Some("t".repeat(257)));
        assert_eq!(tag.map_err(|e| e.param), Err(Some("tag".into())));
        let p = start_process(
            "ls".into(),
            Some(vec!["-l".into()]),
            None,
            Some("/workspace".into()),
            Some("t".into()),
        )
        .expect("valid");
        assert_eq!(p.config.args, vec!["-l".to_owned()]);
        assert_eq!(p.tag.as_deref(), Some("t"));
    }

    #[test]
    fn a_large_command_within_the_limit_is_accepted_and_one_past_it_refused() {
        // 7 arguments of 9,000 bytes: 63,000 bytes of argument text, within 64 KiB as JSON.
        let p = with_args((0..7).map(|_| "a".repeat(9_000)).collect()).expect("within the limit");
        assert_eq!(p.config.args.len(), 7);
        let err = with_args((0..8).map(|_| "a".repeat(9_000)).collect()).expect_err("past the limit");
        assert!(err.message.contains("65536"), "{}", err.message);
        // Escapes count as what they take: 12,000 control characters are 72,000 bytes of JSON.
        assert!(with_args(vec!["\u{1}".repeat(12_000)]).is_err());
        // envs count too.
        assert!(with_envs(sized(20, &"v".repeat(4_000))).is_err());
    }

    #[test]
    fn cwd_must_be_an_absolute_path_the_kernel_accepts() {
        for bad in [
            "rel/dir".to_owned(),
            String::new(),
            "/work\u{0}space".to_owned(),
            format!("/{}", "d".repeat(4095)),
            format!("/{}", "d".repeat(256)),
        ] {
            assert_eq!(with_cwd(&bad).map_err(|e| e.param), Err(Some("cwd".into())), "{bad}");
        }
        let deep = format!("/{}", vec!["d".repeat(255); 15].join("/"));
        assert!(deep.len() <= MAX_CWD_BYTES);
        assert!(with_cwd(&deep).is_ok());
        assert!(with_cwd("/workspace/does/not/exist").is_ok());
    }

    #[test]
    fn env_names_and_path_are_checked() {
        for bad in [
            map(&[("A=B", "x")]),
            map(&[("", "x")]),
            map(&[("PATH", "")]),
            map(&[("PATH", "/bin\u{0}")]),
            map(&[("PATH", "/usr/bin:")]),
            map(&[("PATH", "bin:/usr/bin")]),
            map(&[("X", "a\u{0}b")]),
            map(&[("X", &"v".repeat(4097))]),
            sized(65, "v"),
        ] {
            assert!(with_envs(bad.clone()).is_err(), "{bad:?}");
            assert!(create_sandbox(None, None, Some(bad.clone())).is_err(), "{bad:?}");
        }
        assert!(with_envs(map(&[("PATH", "/usr/bin:/bin"), ("EMPTY", "")])).is_ok());
    }

    #[test]
    fn sandbox_env_vars_are_bounded_as_a_whole() {
        assert!(create_sandbox(None, None, Some(sized(17, &"v".repeat(4_000)))).is_err());
        assert!(create_sandbox(None, None, Some(sized(15, &"v".repeat(4_000)))).is_ok());
    }

    #[test]
    fn agentplane_metadata_keys_are_reserved() {
        for key in ["agentplane.session_id", "agentplane.anything", "AgentPlane.Session_Id"] {
            let err = create_sandbox(None, Some(map(&[(key, "x")])), None).expect_err(key);
            assert_eq!(err.param, Some(format!("metadata.{key}")));
        }
        for key in ["agentplane", "agentplanex.y", "my.agentplane.key", "a"] {
            assert!(create_sandbox(None, Some(map(&[(key, "x")])), None).is_ok(), "{key}");
        }
        assert!(reserved_metadata_key(crate::sandbox::SESSION_METADATA_KEY));
    }
}
