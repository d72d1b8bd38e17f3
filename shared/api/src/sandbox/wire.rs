//! The sandbox API's wire: request bodies as read (their JSON types; the domain's
//! `sandbox::request` decides the rest), responses as written, and query parameters as
//! documented. camelCase, times in RFC 3339 UTC, output timestamps in Unix milliseconds, output
//! data in base64. The OpenAPI document of `/sandbox/v1` is derived from these types.

use std::collections::BTreeMap;
use std::fmt;

use agentplane_domain::Timestamp;
use agentplane_domain::ValidationError;
use agentplane_domain::sandbox::SandboxState as DomainState;
use agentplane_domain::sandbox::command::Stream;
use agentplane_domain::sandbox::{self as domain, ProcessRecord, request};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

// ---- Requests ---------------------------------------------------------------------------------

/// `POST /sandbox/v1/sandboxes`. Every field may be absent or `null` (an empty body reads as
/// `{}`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewSandbox {
    /// `base` (the one template Agentplane runs); absent reads as `base`.
    #[serde(rename = "templateID")]
    #[schema(pattern = "^base$")]
    pub template_id: Option<String>,
    /// Seconds until the sandbox expires: 1 to 3600 (default 300).
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 3600)]
    pub timeout: Option<Integer>,
    /// At most 16 entries; keys 1 to 64 characters, values up to 512; keys starting with
    /// `agentplane.` (any case) are reserved.
    #[schema(value_type = Option<BTreeMap<MetadataKey, MetadataValue>>)]
    pub metadata: Option<Strings>,
    /// The sandbox's environment, by the rules of a process's `envs`; at most 64 KiB as JSON.
    #[schema(value_type = Option<BTreeMap<EnvName, EnvValue>>)]
    pub env_vars: Option<Strings>,
}

impl TryFrom<NewSandbox> for request::CreateSandbox {
    type Error = ValidationError;

    fn try_from(body: NewSandbox) -> Result<Self, ValidationError> {
        if body.template_id.as_deref().is_some_and(|t| t != super::e2b_wire::TEMPLATE_ID) {
            return Err(ValidationError::new(
                "templateID",
                "`templateID` must be `base`: this deployment runs one sandbox template",
            ));
        }
        request::create_sandbox(
            body.timeout.map(|t| t.0),
            body.metadata.map(|m| m.0),
            body.env_vars.map(|e| e.0),
        )
    }
}

/// `POST /sandbox/v1/sandboxes/{sandbox_id}/timeout`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct NewTimeout {
    /// Seconds from now: 900, 1800 or 3600. Never shortens the deadline.
    #[schema(value_type = i64, minimum = 900, maximum = 3600, multiple_of = 900, examples(900, 1800, 3600))]
    pub timeout: Integer,
}

impl TryFrom<NewTimeout> for domain::TimeoutSeconds {
    type Error = ValidationError;

    fn try_from(body: NewTimeout) -> Result<Self, ValidationError> {
        request::set_timeout(body.timeout.0)
    }
}

/// `POST /sandbox/v1/sandboxes/{sandbox_id}/processes`. `cmd`, `args`, `envs` and `cwd`
/// together take at most 64 KiB as JSON.
#[derive(Debug, Deserialize, ToSchema)]
pub struct StartProcess {
    /// The program: not blank, at most 16,384 characters, no NUL.
    #[schema(min_length = 1, max_length = 16384, pattern = "^[^\\x00]*[^\\s\\x00][^\\x00]*$")]
    pub cmd: String,
    /// At most 256 arguments of at most 16,384 characters, no NUL.
    #[schema(value_type = Option<Vec<Arg>>, max_items = 256)]
    pub args: Option<List>,
    /// At most 64 variables named `[A-Za-z_][A-Za-z0-9_]*`, values up to 4096 characters
    /// without NUL; `PATH`, when set, is a `:`-list of absolute directories.
    #[schema(value_type = Option<BTreeMap<EnvName, EnvValue>>)]
    pub envs: Option<Strings>,
    /// An absolute working directory: at most 4095 bytes, 255 per component.
    #[schema(max_length = 4095, pattern = "^(/[^/\\x00]{0,255})+$")]
    pub cwd: Option<String>,
    /// A label of the caller's, at most 256 characters.
    #[schema(max_length = 256, pattern = "^[^\\x00]*$")]
    pub tag: Option<String>,
}

impl TryFrom<StartProcess> for request::StartProcess {
    type Error = ValidationError;

    fn try_from(body: StartProcess) -> Result<Self, ValidationError> {
        request::start_process(body.cmd, body.args.map(|a| a.0), body.envs.map(|e| e.0), body.cwd, body.tag)
    }
}

// What the document says of the strings in request bodies (the rules themselves are the
// domain's, in `sandbox::request`).

/// An argument of a process: at most 16,384 characters, no NUL.
#[derive(ToSchema)]
#[schema(max_length = 16384, pattern = "^[^\\x00]*$")]
#[allow(dead_code)]
pub struct Arg(String);

/// An environment variable's name.
#[derive(ToSchema)]
#[schema(pattern = "^[A-Za-z_][A-Za-z0-9_]{0,255}$")]
#[allow(dead_code)]
pub struct EnvName(String);

/// An environment variable's value: at most 4096 characters, no NUL.
#[derive(ToSchema)]
#[schema(max_length = 4096, pattern = "^[^\\x00]*$")]
#[allow(dead_code)]
pub struct EnvValue(String);

/// A metadata key: 1 to 64 characters.
#[derive(ToSchema)]
#[schema(min_length = 1, max_length = 64)]
#[allow(dead_code)]
pub struct MetadataKey(String);

/// A metadata value: at most 512 characters.
#[derive(ToSchema)]
#[schema(max_length = 512)]
#[allow(dead_code)]
pub struct MetadataValue(String);

/// A JSON integer; a type error reads "must be an integer" (serde would say "i64").
#[derive(Debug, Clone, Copy)]
pub struct Integer(pub i64);

impl<'de> Deserialize<'de> for Integer {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Integer;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Integer, E> {
                Ok(Integer(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Integer, E> {
                i64::try_from(v)
                    .map(Integer)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
            }
        }
        deserializer.deserialize_i64(V)
    }
}

/// A JSON array of strings; a type error reads "must be an array of strings".
#[derive(Debug, Clone)]
pub struct List(pub Vec<String>);

impl<'de> Deserialize<'de> for List {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = List;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of strings")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<List, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element::<String>()? {
                    out.push(item);
                }
                Ok(List(out))
            }
        }
        deserializer.deserialize_seq(V)
    }
}

/// A JSON object of strings; a type error reads "must be an object" (of the whole) or "must
/// be a string" (naming the entry).
#[derive(Debug, Clone)]
pub struct Strings(pub BTreeMap<String, String>);

impl<'de> Deserialize<'de> for Strings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Strings;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strings, A::Error> {
                let mut out = BTreeMap::new();
                while let Some((key, value)) = map.next_entry::<String, String>()? {
                    out.insert(key, value);
                }
                Ok(Strings(out))
            }
        }
        deserializer.deserialize_map(V)
    }
}

// ---- Query parameters -------------------------------------------------------------------------

/// `GET …/processes`. Any other parameter, or one given twice, is a 400.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ProcessListParams {
    /// `live` (running; the default), `exited` (finished) or `all` (every retained observation).
    #[param(pattern = "^(live|exited|all)$")]
    state: Option<String>,
}

/// `GET …/processes/{process_id}/output`. Any other parameter, or one given twice, is a 400.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct OutputParams {
    /// The `cursor` of the previous read: only chunks after it are returned.
    #[param(pattern = "^(0|[1-9][0-9]*)$")]
    cursor: Option<String>,
    /// Most chunks to return, 1 to 1024 (default 1024).
    #[param(minimum = 1, maximum = 1024)]
    limit: Option<u16>,
}

// ---- Responses --------------------------------------------------------------------------------

/// A sandbox's state. `expired` from its `endAt` on; `paused` stops the clock.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxState {
    Running,
    Paused,
    Expired,
    Killed,
}

impl From<DomainState> for SandboxState {
    fn from(state: DomainState) -> Self {
        match state {
            DomainState::Running => Self::Running,
            DomainState::Paused => Self::Paused,
            DomainState::Expired => Self::Expired,
            DomainState::Killed => Self::Killed,
        }
    }
}

/// A sandbox: E2B's `SandboxDetail`, with what Agentplane adds (`envVars`, `isolation`) and
/// its own states (`expired` and `killed` sandboxes stay readable here).
#[derive(Debug, Serialize, ToSchema)]
pub struct Sandbox {
    /// `base`: the one template Agentplane runs.
    #[serde(rename = "templateID")]
    #[schema(example = "base")]
    pub template_id: &'static str,
    #[serde(rename = "sandboxID")]
    #[schema(pattern = "^sbx_")]
    pub sandbox_id: String,
    /// Deprecated by E2B; the same for every sandbox.
    #[serde(rename = "clientID")]
    pub client_id: &'static str,
    /// UTC.
    #[serde(rename = "startedAt")]
    #[schema(format = DateTime)]
    pub started_at: String,
    /// When it expires (UTC), unless extended or paused.
    #[serde(rename = "endAt")]
    #[schema(format = DateTime)]
    pub end_at: String,
    /// The envd protocol version the sandbox's node speaks.
    #[serde(rename = "envdVersion")]
    #[schema(example = "0.5.7")]
    pub envd_version: &'static str,
    /// The token envd clients present as `X-Access-Token`: shown to the owning project on
    /// create, connect, resume and read; absent for a sandbox made without one (and in lists).
    #[serde(rename = "envdAccessToken", skip_serializing_if = "Option::is_none")]
    pub envd_access_token: Option<String>,
    /// Where envd clients reach the sandbox (`AGENTPLANE_E2B_DOMAIN`); `null` unless configured.
    pub domain: Option<String>,
    /// CPU cores the node gives it; 0 when it enforces no limit.
    #[serde(rename = "cpuCount")]
    pub cpu_count: u32,
    /// Memory the node gives it, MiB; 0 when it enforces no limit.
    #[serde(rename = "memoryMB")]
    pub memory_mb: u64,
    /// The size of the sandbox's disk (`/workspace` and `/tmp` together), MiB; 0 when its node
    /// gives it none.
    #[serde(rename = "diskSizeMB")]
    pub disk_size_mb: u64,
    pub state: SandboxState,
    pub metadata: BTreeMap<String, String>,
    #[serde(rename = "envVars")]
    pub env_vars: BTreeMap<String, String>,
    /// What the node reports about how the sandbox is isolated.
    pub isolation: BTreeMap<String, String>,
}

/// The CPU cores, memory (MiB) and disk (MiB) a node reported for a sandbox; 0 for a limit it
/// does not enforce.
pub fn resources(isolation: &BTreeMap<String, String>) -> (u32, u64, u64) {
    let cores = isolation
        .get("cpu_limit_cores")
        .and_then(|c| c.parse::<f64>().ok())
        .filter(|c| c.is_finite() && *c > 0.0)
        .map_or(0, |c| c.ceil().min(f64::from(u32::MAX)) as u32);
    let memory = isolation
        .get("memory_limit_bytes")
        .and_then(|b| b.parse::<u64>().ok())
        .map_or(0, |b| b / (1024 * 1024));
    let disk = isolation.get("disk_size_mb").and_then(|mb| mb.parse().ok()).unwrap_or(0);
    (cores, memory, disk)
}

impl Sandbox {
    /// `sandbox` as it reads at `now` (a running sandbox past its `endAt` reads `expired`),
    /// without its access token.
    pub fn at(sandbox: &domain::Sandbox, now: Timestamp) -> Self {
        let (cpu_count, memory_mb, disk_size_mb) = resources(&sandbox.isolation);
        Self {
            template_id: super::e2b_wire::TEMPLATE_ID,
            sandbox_id: sandbox.id.as_str().to_owned(),
            client_id: super::e2b_wire::CLIENT_ID,
            started_at: sandbox.started_at.rfc3339(),
            end_at: sandbox.lifecycle.end_at.rfc3339(),
            envd_version: domain::ENVD_VERSION,
            envd_access_token: None,
            domain: None,
            cpu_count,
            memory_mb,
            disk_size_mb,
            state: sandbox.lifecycle.effective(now).into(),
            metadata: sandbox.metadata.as_map().clone(),
            env_vars: sandbox.env_vars.clone(),
            isolation: sandbox.isolation.clone(),
        }
    }

    /// The same, with what the owning project uses to reach its envd.
    pub fn with_access(mut self, envd_access_token: Option<String>, domain: Option<String>) -> Self {
        self.envd_access_token = envd_access_token;
        self.domain = domain;
        self
    }
}

/// `POST …/processes`: the process runs.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProcessStarted {
    /// `obs-<n>`.
    #[serde(rename = "processId")]
    #[schema(pattern = "^obs-[0-9]+$")]
    pub process_id: String,
    /// Its operating-system process id inside the sandbox, when the node reported one.
    pub pid: Option<u32>,
}

/// A process's state. `unknown`: observation was interrupted and no exit was witnessed.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProcessState {
    Running,
    Exited,
    Unknown,
}

impl From<domain::ProcessState> for ProcessState {
    fn from(state: domain::ProcessState) -> Self {
        match state {
            domain::ProcessState::Running => Self::Running,
            domain::ProcessState::Exited => Self::Exited,
            domain::ProcessState::Unknown => Self::Unknown,
        }
    }
}

/// The command a process was started with.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProcessConfig {
    pub cmd: String,
    pub args: Vec<String>,
    pub envs: BTreeMap<String, String>,
    pub cwd: Option<String>,
}

/// What is known about one process. Nothing is invented: `exitCode` only for a witnessed exit.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Process {
    /// `obs-<n>` for a process whose start was observed, `live-<pid>` for one only seen running.
    #[schema(pattern = "^(obs|live)-[0-9]+$")]
    pub process_id: String,
    /// Operating-system process id inside the sandbox.
    pub pid: u32,
    /// The tag it was started with; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    pub config: ProcessConfig,
    /// Whether it runs in a pseudo-terminal; present for observed processes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pty: Option<bool>,
    /// When its start was observed, UTC.
    #[schema(format = DateTime)]
    pub started_at: String,
    /// When its exit was observed, UTC; absent until one was witnessed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub exited_at: Option<String>,
    /// Present only when the exit was witnessed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub state: ProcessState,
    /// Whether the platform watched it start (false for one only seen running).
    pub observed: bool,
    /// Observation was interrupted: output or the exit may be missing.
    pub observation_gap: bool,
    /// Old output was dropped to stay within the retention limits.
    pub output_truncated: bool,
}

impl From<&ProcessRecord> for Process {
    fn from(p: &ProcessRecord) -> Self {
        Self {
            process_id: p.id.to_string(),
            pid: p.pid,
            tag: p.tag.clone(),
            config: ProcessConfig {
                cmd: p.config.cmd.clone(),
                args: p.config.args.clone(),
                envs: p.config.envs.clone(),
                cwd: p.config.cwd.clone(),
            },
            pty: p.observed.then_some(p.pty),
            started_at: p.started_at.rfc3339(),
            exited_at: p.exited_at.map(Timestamp::rfc3339),
            exit_code: p.exit_code,
            signal: p.signal,
            state: p.state.into(),
            observed: p.observed,
            observation_gap: p.observation_gap,
            output_truncated: p.output_truncated,
        }
    }
}

/// `GET …/processes`: newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProcessList {
    pub processes: Vec<Process>,
}

/// Which stream a chunk was written to.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutputStream {
    Stdout,
    Stderr,
}

impl From<Stream> for OutputStream {
    fn from(stream: Stream) -> Self {
        match stream {
            Stream::Stdout => Self::Stdout,
            Stream::Stderr => Self::Stderr,
        }
    }
}

/// One retained chunk of output.
#[derive(Debug, Serialize, ToSchema)]
pub struct OutputChunk {
    pub stream: OutputStream,
    /// The bytes, base64.
    #[schema(content_encoding = "base64")]
    pub data: String,
    /// When it was captured, Unix milliseconds.
    pub timestamp: i64,
}

/// `GET …/processes/{process_id}/output`: retained output, oldest first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessOutput {
    pub process_id: String,
    pub state: ProcessState,
    pub chunks: Vec<OutputChunk>,
    /// Pass as `cursor` to read on; `null` when nothing was read yet.
    pub cursor: Option<String>,
    /// More chunks follow this page.
    pub has_more: bool,
    /// Output was dropped (retention limits or age) before it could be read.
    pub truncated: bool,
    pub observation_gap: bool,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::body::from_object;

    fn read<T: serde::de::DeserializeOwned>(body: Value) -> Result<T, ValidationError> {
        match body {
            Value::Object(map) => from_object(map),
            _ => from_object(serde_json::Map::new()),
        }
    }

    #[track_caller]
    #[allow(clippy::needless_pass_by_value)]
    fn refused<T: serde::de::DeserializeOwned + fmt::Debug>(body: Value, param: &str, message: &str) {
        let err = read::<T>(body.clone()).expect_err("a type error");
        assert_eq!((err.param.as_deref(), err.message.as_str()), (Some(param), message), "{body}");
    }

    #[test]
    fn wrong_types_name_the_field_in_json_terms() {
        refused::<NewSandbox>(json!({"timeout": "60"}), "timeout", "`timeout` must be an integer");
        refused::<NewSandbox>(json!({"timeout": 60.5}), "timeout", "`timeout` must be an integer");
        refused::<NewSandbox>(json!({"timeout": u64::MAX}), "timeout", "`timeout` must be an integer");
        refused::<NewSandbox>(json!({"metadata": ["x"]}), "metadata", "`metadata` must be an object");
        refused::<NewSandbox>(json!({"envVars": {"A": 1}}), "envVars.A", "`envVars.A` must be a string");
        refused::<NewTimeout>(json!({}), "timeout", "`timeout` is required");
        refused::<NewTimeout>(json!({"timeout": 900.5}), "timeout", "`timeout` must be an integer");
        refused::<StartProcess>(json!({}), "cmd", "`cmd` is required");
        refused::<StartProcess>(json!({"cmd": 7}), "cmd", "`cmd` must be a string");
        refused::<StartProcess>(
            json!({"cmd": "ls", "args": "x"}),
            "args",
            "`args` must be an array of strings",
        );
        refused::<StartProcess>(
            json!({"cmd": "ls", "args": ["-l", 2]}),
            "args[1]",
            "`args[1]` must be a string",
        );
        refused::<StartProcess>(json!({"cmd": "ls", "envs": "A=1"}), "envs", "`envs` must be an object");
        refused::<StartProcess>(json!({"cmd": "ls", "cwd": 1}), "cwd", "`cwd` must be a string");
        refused::<StartProcess>(json!({"cmd": "ls", "tag": false}), "tag", "`tag` must be a string");
    }

    #[test]
    fn a_type_error_does_not_quote_the_value() {
        let err = read::<NewSandbox>(json!({"timeout": "a secret value"})).expect_err("a type error");
        assert!(!err.message.contains("secret"), "{}", err.message);
    }

    #[test]
    fn null_reads_as_absent_and_the_domain_decides_the_rest() {
        let body: NewSandbox =
            read(json!({"timeout": null, "metadata": null, "envVars": null})).expect("nulls");
        let new = request::CreateSandbox::try_from(body).expect("defaults");
        assert_eq!((new.timeout_s, new.env_vars.len()), (300, 0));
        let body: NewSandbox = read(json!({"timeout": 3601})).expect("typed");
        let err = request::CreateSandbox::try_from(body).expect_err("out of range");
        assert_eq!(err.param.as_deref(), Some("timeout"));
        let body: StartProcess =
            read(json!({"cmd": "ls", "args": null, "envs": null, "cwd": null, "tag": null})).expect("nulls");
        let new = request::StartProcess::try_from(body).expect("valid");
        assert_eq!((new.config.args.len(), new.config.cwd, new.tag), (0, None, None));
        let body: StartProcess = read(json!({"cmd": "ls", "cwd": "rel"})).expect("typed");
        assert!(request::StartProcess::try_from(body).is_err());
        let body: NewTimeout = read(json!({"timeout": 1800})).expect("typed");
        assert_eq!(domain::TimeoutSeconds::try_from(body).map(|t| t.seconds()), Ok(1800));
    }

    #[test]
    fn a_process_reads_with_only_what_was_witnessed() {
        let record = ProcessRecord {
            id: domain::ProcessId::Live(42),
            pid: 42,
            tag: None,
            config: domain::ProcessConfig {
                cmd: "sh".into(),
                args: vec![],
                envs: BTreeMap::new(),
                cwd: None,
            },
            pty: false,
            started_at: Timestamp::from_unix_millis(1_500),
            exited_at: None,
            exit_code: None,
            signal: None,
            state: domain::ProcessState::Unknown,
            observed: false,
            observation_gap: true,
            output_truncated: false,
        };
        let value = serde_json::to_value(Process::from(&record)).expect("json");
        assert_eq!(
            value,
            json!({
                "processId": "live-42",
                "pid": 42,
                "config": {"cmd": "sh", "args": [], "envs": {}, "cwd": null},
                "startedAt": "1970-01-01T00:00:01.5Z",
                "state": "unknown",
                "observed": false,
                "observationGap": true,
                "outputTruncated": false,
            })
        );
        let exited = ProcessRecord {
            id: domain::ProcessId::Observed(1),
            tag: Some("t".into()),
            observed: true,
            exited_at: Some(Timestamp::from_unix_millis(2_000)),
            exit_code: Some(0),
            state: domain::ProcessState::Exited,
            ..record
        };
        let value = serde_json::to_value(Process::from(&exited)).expect("json");
        assert_eq!(value["processId"], "obs-1");
        assert_eq!(value["tag"], "t");
        assert_eq!(value["pty"], false);
        assert_eq!(value["exitedAt"], "1970-01-01T00:00:02Z");
        assert_eq!(value["exitCode"], 0);
        assert!(value.get("signal").is_none(), "{value}");
    }

    /// Every operation of the sandbox document answers a described 2xx and its 401, and every
    /// error it documents has E2B's body.
    #[test]
    fn every_documented_error_of_the_surface_is_e2b_shaped() {
        let doc = crate::openapi::document(crate::openapi::Surface::Sandbox);
        let doc: Value = serde_json::from_str(&doc.to_json().expect("json")).expect("a document");
        let mut operations = 0;
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for (method, operation) in item.as_object().expect("a path item") {
                operations += 1;
                let responses = operation["responses"].as_object().expect("responses");
                let at = format!("{method} {path}");
                assert!(responses.keys().any(|s| s.starts_with('2')), "{at} documents no success");
                assert!(responses.contains_key("401"), "{at} does not document its 401");
                for (status, response) in responses.iter().filter(|(s, _)| s.as_str() >= "400") {
                    assert_eq!(
                        response["content"]["application/json"]["schema"]["$ref"],
                        "#/components/schemas/SandboxError",
                        "{at} {status}"
                    );
                }
            }
        }
        assert_eq!(operations, 14);
        let error = &doc["components"]["schemas"]["SandboxError"];
        assert_eq!(error["required"], json!(["code", "message"]), "{error}");
    }
}
