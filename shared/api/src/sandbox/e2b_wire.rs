//! The wire of E2B's lifecycle routes (`/v2/sandboxes`, `…/connect`), as the E2B SDKs send and
//! parse it (E2B's `spec/openapi.yml`: `NewSandbox`, `ConnectSandbox`, `Sandbox`,
//! `ListedSandbox`). Fields E2B defines that Agentplane cannot honour are a 400 naming them.

use std::collections::BTreeMap;

use agentplane_domain::ValidationError;
use agentplane_domain::sandbox::{self as domain, ENVD_VERSION, request};
use agentplane_domain::{Timestamp, sandbox::SandboxState as DomainState};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::wire::{EnvName, EnvValue, Integer, MetadataKey, MetadataValue, Strings, resources};

/// The one template Agentplane runs.
pub const TEMPLATE_ID: &str = "base";
/// E2B's deprecated `clientID`: the same for every sandbox (it names no host).
pub const CLIENT_ID: &str = "agentplane";

// ---- Requests ---------------------------------------------------------------------------------

/// `POST /sandbox/v1/v2/sandboxes`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct NewSandboxV2 {
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
    #[serde(rename = "envVars")]
    #[schema(value_type = Option<BTreeMap<EnvName, EnvValue>>)]
    pub env_vars: Option<Strings>,
    /// Only `false` (a sandbox is never paused on its timeout).
    #[serde(rename = "autoPause")]
    pub auto_pause: Option<bool>,
    /// Accepted either way; not honoured yet: sandboxes have no network.
    pub allow_internet_access: Option<bool>,
    /// Not supported: any value but `null` is a 400.
    #[schema(value_type = Option<Object>)]
    pub mcp: Option<Value>,
    /// Not supported: any value but `null` is a 400.
    #[schema(value_type = Option<Object>)]
    pub network: Option<Value>,
    /// Not supported: any value but `null` is a 400.
    #[serde(rename = "autoResume")]
    #[schema(value_type = Option<Object>)]
    pub auto_resume: Option<Value>,
    /// Not supported: any value but `null` is a 400.
    #[serde(rename = "volumeMounts")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub volume_mounts: Option<Value>,
    /// Not supported: any value but `null` is a 400.
    #[schema(value_type = Option<Object>)]
    pub iam: Option<Value>,
}

fn unsupported(param: &str) -> ValidationError {
    ValidationError::new(param, format!("`{param}` is not supported by this deployment"))
}

impl TryFrom<NewSandboxV2> for request::CreateSandbox {
    type Error = ValidationError;

    fn try_from(body: NewSandboxV2) -> Result<Self, ValidationError> {
        if body.template_id.as_deref().is_some_and(|t| t != TEMPLATE_ID) {
            return Err(ValidationError::new(
                "templateID",
                format!("`templateID` must be `{TEMPLATE_ID}`: this deployment runs one sandbox template"),
            ));
        }
        if body.auto_pause == Some(true) {
            return Err(unsupported("autoPause"));
        }
        // Sandboxes have no network yet: `false` is what they get; `true` (the SDKs' default,
        // sent on every create) is accepted and not honoured (README, The E2B SDK).
        let others = [
            ("mcp", &body.mcp),
            ("network", &body.network),
            ("autoResume", &body.auto_resume),
            ("volumeMounts", &body.volume_mounts),
            ("iam", &body.iam),
        ];
        if let Some((param, _)) = others.iter().find(|(_, v)| v.as_ref().is_some_and(|v| !v.is_null())) {
            return Err(unsupported(param));
        }
        request::create_sandbox(
            body.timeout.map(|t| t.0),
            body.metadata.map(|m| m.0),
            body.env_vars.map(|e| e.0),
        )
    }
}

/// `POST …/sandboxes/{sandbox_id}/connect` (and its `/v2/` twin).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct ConnectSandbox {
    /// Seconds from now, 1 to 3600: the deadline moves there when that is later (never
    /// earlier). Absent: the deadline stays (a paused sandbox resumes with the time it had left).
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 3600)]
    pub timeout: Option<Integer>,
    /// Not supported: any value but `null` is a 400 (a paused sandbox keeps its memory).
    #[schema(value_type = Option<bool>)]
    pub memory: Option<Value>,
}

impl ConnectSandbox {
    /// The timeout, checked.
    pub fn timeout_s(&self) -> Result<Option<i64>, ValidationError> {
        if self.memory.as_ref().is_some_and(|v| !v.is_null()) {
            return Err(unsupported("memory"));
        }
        match self.timeout {
            None => Ok(None),
            Some(Integer(t)) if (1..=domain::lifecycle::CREATE_TIMEOUT_MAX_S).contains(&t) => Ok(Some(t)),
            Some(_) => Err(ValidationError::new(
                "timeout",
                format!(
                    "`timeout` must be between 1 and {} seconds",
                    domain::lifecycle::CREATE_TIMEOUT_MAX_S
                ),
            )),
        }
    }
}

// ---- Responses --------------------------------------------------------------------------------

/// E2B's `Sandbox`: what create and connect answer, with what an SDK needs to reach envd.
#[derive(Debug, Serialize, ToSchema)]
pub struct StartedSandbox {
    #[serde(rename = "templateID")]
    #[schema(example = "base")]
    pub template_id: &'static str,
    #[serde(rename = "sandboxID")]
    #[schema(pattern = "^sbx_")]
    pub sandbox_id: String,
    /// Deprecated by E2B; the same for every sandbox.
    #[serde(rename = "clientID")]
    pub client_id: &'static str,
    /// The envd protocol version the sandbox's node speaks.
    #[serde(rename = "envdVersion")]
    #[schema(example = "0.5.7")]
    pub envd_version: &'static str,
    /// The token envd clients present as `X-Access-Token`; `null` for a sandbox made without one.
    #[serde(rename = "envdAccessToken")]
    pub envd_access_token: Option<String>,
    /// Always `null`: no traffic token is needed.
    #[serde(rename = "trafficAccessToken")]
    pub traffic_access_token: Option<String>,
    /// Where envd clients reach the sandbox (`AGENTPLANE_E2B_DOMAIN`); `null` unless configured.
    pub domain: Option<String>,
}

impl StartedSandbox {
    pub fn of(sandbox: &domain::Sandbox, envd_access_token: Option<String>, domain: Option<String>) -> Self {
        Self {
            template_id: TEMPLATE_ID,
            sandbox_id: sandbox.id.as_str().to_owned(),
            client_id: CLIENT_ID,
            envd_version: ENVD_VERSION,
            envd_access_token,
            traffic_access_token: None,
            domain,
        }
    }
}

/// A listed sandbox's state: only live sandboxes are listed.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ListedState {
    Running,
    Paused,
}

/// E2B's `ListedSandbox`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ListedSandbox {
    #[serde(rename = "templateID")]
    pub template_id: &'static str,
    #[serde(rename = "sandboxID")]
    #[schema(pattern = "^sbx_")]
    pub sandbox_id: String,
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
    /// CPU cores the node gives it; 0 when it enforces no limit.
    #[serde(rename = "cpuCount")]
    pub cpu_count: u32,
    /// Memory the node gives it, MiB; 0 when it enforces no limit.
    #[serde(rename = "memoryMB")]
    pub memory_mb: u64,
    /// Its disk (`/workspace` and `/tmp` together), MiB; 0 when its node gives it none.
    #[serde(rename = "diskSizeMB")]
    pub disk_size_mb: u64,
    pub state: ListedState,
    #[serde(rename = "envdVersion")]
    pub envd_version: &'static str,
    pub metadata: BTreeMap<String, String>,
}

impl ListedSandbox {
    /// `None` for a sandbox that is not live at `now`.
    pub fn at(sandbox: &domain::Sandbox, now: Timestamp) -> Option<Self> {
        let state = match sandbox.lifecycle.effective(now) {
            DomainState::Running => ListedState::Running,
            DomainState::Paused => ListedState::Paused,
            DomainState::Expired | DomainState::Killed => return None,
        };
        let (cpu_count, memory_mb, disk_size_mb) = resources(&sandbox.isolation);
        Some(Self {
            template_id: TEMPLATE_ID,
            sandbox_id: sandbox.id.as_str().to_owned(),
            client_id: CLIENT_ID,
            started_at: sandbox.started_at.rfc3339(),
            end_at: sandbox.lifecycle.end_at.rfc3339(),
            cpu_count,
            memory_mb,
            disk_size_mb,
            state,
            envd_version: ENVD_VERSION,
            metadata: sandbox.metadata.as_map().clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::body::from_object;

    fn create(body: Value) -> Result<request::CreateSandbox, ValidationError> {
        let Value::Object(map) = body else { unreachable!("an object") };
        request::CreateSandbox::try_from(from_object::<NewSandboxV2>(map)?)
    }

    #[test]
    fn what_the_sdk_sends_by_default_creates() {
        let new = create(json!({"templateID": "base", "metadata": {}, "envVars": {}})).expect("valid");
        assert_eq!(new.timeout_s, 300);
        let new = create(json!({"templateID": "base", "timeout": 60, "autoPause": false})).expect("valid");
        assert_eq!(new.timeout_s, 60);
        // No network either way (yet): both are accepted.
        create(json!({"allow_internet_access": true})).expect("valid");
        create(json!({"allow_internet_access": false})).expect("valid");
    }

    #[test]
    fn what_cannot_be_honoured_is_a_400_naming_it() {
        let param = |body| create(body).expect_err("refused").param;
        assert_eq!(param(json!({"templateID": "code-interpreter-v1"})).as_deref(), Some("templateID"));
        assert_eq!(param(json!({"autoPause": true})).as_deref(), Some("autoPause"));
        assert_eq!(param(json!({"network": {"allowOut": []}})).as_deref(), Some("network"));
        assert_eq!(param(json!({"volumeMounts": []})).as_deref(), Some("volumeMounts"));
        assert_eq!(param(json!({"timeout": 0})).as_deref(), Some("timeout"));
        assert_eq!(param(json!({"timeout": "60"})).as_deref(), Some("timeout"));
        assert_eq!(
            param(json!({"metadata": {"agentplane.x": "1"}})).as_deref(),
            Some("metadata.agentplane.x")
        );
    }

    #[test]
    fn connect_takes_a_timeout_of_up_to_an_hour() {
        let read = |body: Value| {
            let Value::Object(map) = body else { unreachable!("an object") };
            from_object::<ConnectSandbox>(map).and_then(|c| c.timeout_s())
        };
        assert_eq!(read(json!({})), Ok(None));
        assert_eq!(read(json!({"timeout": 900})), Ok(Some(900)));
        for bad in [
            json!({"timeout": 0}),
            json!({"timeout": 3601}),
            json!({"timeout": "x"}),
            json!({"memory": false}),
        ] {
            assert!(read(bad.clone()).is_err(), "{bad}");
        }
    }
}
