//! What every handler shares: storage clients and configuration, built once per process.

use std::sync::Arc;

use agentplane_domain::api_key::CoreKey;
use agentplane_store::{ResourceNames, Store};
use anyhow::Context;

#[derive(Clone, Debug)]
pub struct App {
    pub store: Store,
    core_key: Option<Arc<CoreKey>>,
}

impl App {
    pub fn new(store: Store, core_key: Option<CoreKey>) -> Self {
        Self { store, core_key: core_key.map(Arc::new) }
    }

    /// From the environment, as Lambda and the local gateway run it. The Core key comes from
    /// `AGENTPLANE_CORE_KEY`, or from the Secrets Manager secret named by
    /// `AGENTPLANE_CORE_KEY_SECRET_ID` (the deployed stack's way: never a literal in the template).
    pub async fn from_env() -> anyhow::Result<Self> {
        let sdk = agentplane_store::aws::sdk_config_from_env().await;
        let store = Store::new(&sdk, ResourceNames::from_env());
        let core_key =
            match (std::env::var("AGENTPLANE_CORE_KEY"), std::env::var("AGENTPLANE_CORE_KEY_SECRET_ID")) {
                (Ok(key), _) => {
                    Some(CoreKey::new(key).context("AGENTPLANE_CORE_KEY is shorter than 16 characters")?)
                }
                (_, Ok(secret_id)) => Some(core_key_from_secret(&sdk, &secret_id).await?),
                _ => None,
            };
        Ok(Self::new(store, core_key))
    }

    /// `None` when the deployment configured no Core key: every Core request is then refused.
    pub fn core_key(&self) -> Option<&CoreKey> {
        self.core_key.as_deref()
    }
}

async fn core_key_from_secret(sdk: &aws_config::SdkConfig, secret_id: &str) -> anyhow::Result<CoreKey> {
    let client = aws_sdk_secretsmanager::Client::new(sdk);
    let out = client
        .get_secret_value()
        .secret_id(secret_id)
        .send()
        .await
        .context("reading the Core key from Secrets Manager")?;
    let value = out.secret_string().context("the Core key secret has no string value")?;
    CoreKey::new(value.trim()).context("the Core key secret is shorter than 16 characters")
}
