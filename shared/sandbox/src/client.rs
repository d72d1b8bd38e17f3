//! The daemon's only way to Core: the node API over HTTP, with the node token.

use std::time::Duration;

use agentplane_domain::ids::CommandId;
use agentplane_domain::sandbox::command::{CommandEnvelope, CommandOutcome, Report};
use agentplane_domain::sandbox::host::Heartbeat;
use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

/// Clones share the token: a rotation reaches every task of the daemon at once.
#[derive(Clone)]
pub struct CoreClient {
    http: reqwest::Client,
    base: String,
    token: std::sync::Arc<std::sync::RwLock<String>>,
}

/// What `POST /node/v1/token` answers.
#[derive(Debug, Clone, Deserialize)]
pub struct RotatedToken {
    pub token: String,
    /// Unix seconds: the token the rotation was asked with is refused from then on.
    pub previous_token_expires_at: i64,
}

/// Enrolls a node named `name` with the deployment's enrollment key: its token.
pub async fn enroll(base: &str, key: &str, name: &str) -> anyhow::Result<String> {
    #[derive(Deserialize)]
    struct Answer {
        token: String,
    }
    let http = reqwest::Client::builder().timeout(Duration::from_secs(40)).build()?;
    let response = http
        .post(format!("{}/node/v1/enroll", base.trim_end_matches('/')))
        .bearer_auth(key)
        .json(&serde_json::json!({ "name": name }))
        .send()
        .await?;
    Ok(CoreClient::check(response).await?.json::<Answer>().await.context("enrollment")?.token)
}

#[derive(Debug, Clone, Deserialize)]
pub struct HostedSandbox {
    pub sandbox_id: agentplane_domain::sandbox::SandboxId,
    pub state: String,
    pub end_at: agentplane_domain::Timestamp,
    #[serde(default)]
    pub env_vars: std::collections::BTreeMap<String, String>,
}

impl CoreClient {
    pub fn new(base: impl Into<String>, token: impl Into<String>) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(40)).build()?;
        Ok(Self {
            http,
            base: base.into().trim_end_matches('/').to_owned(),
            token: std::sync::Arc::new(std::sync::RwLock::new(token.into())),
        })
    }

    /// The token requests carry from now on.
    pub fn token(&self) -> String {
        self.token.read().map(|t| t.clone()).unwrap_or_default()
    }

    pub fn set_token(&self, token: String) {
        if let Ok(mut held) = self.token.write() {
            *held = token;
        }
    }

    /// Asks Core for a new token (the one held stays accepted for Core's grace). The caller
    /// saves it, then [`CoreClient::set_token`]s it.
    pub async fn rotate_token(&self) -> anyhow::Result<RotatedToken> {
        let response =
            self.http.post(format!("{}/node/v1/token", self.base)).bearer_auth(self.token()).send().await?;
        Self::check(response).await?.json::<RotatedToken>().await.context("rotated token")
    }

    async fn check(response: reqwest::Response) -> anyhow::Result<reqwest::Response> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = response.text().await.unwrap_or_default();
        bail!("Core answered {status}: {body}")
    }

    pub async fn poll(&self, connection: &str, wait_s: u64) -> anyhow::Result<Vec<CommandEnvelope>> {
        #[derive(Deserialize)]
        struct Answer {
            commands: Vec<CommandEnvelope>,
        }
        let response = self
            .http
            // The connection id is ours (hex), so it needs no escaping.
            .get(format!("{}/node/v1/commands?connection={connection}&wait={wait_s}", self.base))
            .bearer_auth(self.token())
            .send()
            .await?;
        Ok(Self::check(response).await?.json::<Answer>().await.context("commands")?.commands)
    }

    pub async fn complete(&self, command: &CommandId, outcome: &CommandOutcome) -> anyhow::Result<()> {
        let response = self
            .http
            .post(format!("{}/node/v1/commands/{command}", self.base))
            .bearer_auth(self.token())
            .json(outcome)
            .send()
            .await?;
        Self::check(response).await.map(|_| ())
    }

    pub async fn heartbeat(&self, heartbeat: &Heartbeat) -> anyhow::Result<()> {
        let response = self
            .http
            .post(format!("{}/node/v1/heartbeat", self.base))
            .bearer_auth(self.token())
            .json(heartbeat)
            .send()
            .await?;
        Self::check(response).await.map(|_| ())
    }

    pub async fn report(&self, report: &Report) -> anyhow::Result<()> {
        let response = self
            .http
            .post(format!("{}/node/v1/reports", self.base))
            .bearer_auth(self.token())
            .json(report)
            .send()
            .await?;
        Self::check(response).await.map(|_| ())
    }

    pub async fn hosted(&self) -> anyhow::Result<Vec<HostedSandbox>> {
        let response = self
            .http
            .get(format!("{}/node/v1/sandboxes", self.base))
            .bearer_auth(self.token())
            .send()
            .await?;
        let body: Value = Self::check(response).await?.json().await?;
        Ok(serde_json::from_value(body.get("sandboxes").cloned().unwrap_or(Value::Null))?)
    }

    /// Reserves the next `obs-<n>` number of a sandbox this node hosts, for a process the node
    /// starts itself (envd): the same conditional counter Core hands numbers out from.
    pub async fn reserve_process(
        &self,
        sandbox: &agentplane_domain::sandbox::SandboxId,
    ) -> anyhow::Result<u32> {
        #[derive(Deserialize)]
        struct Answer {
            number: u32,
        }
        let response = self
            .http
            .post(format!("{}/node/v1/sandboxes/{}/processes", self.base, sandbox.as_str()))
            .bearer_auth(self.token())
            .send()
            .await?;
        Ok(Self::check(response).await?.json::<Answer>().await.context("process reservation")?.number)
    }
}
