//! What every handler shares: storage clients and configuration, built once per process.

use std::sync::{Arc, OnceLock};

use std::time::Duration;

use agentplane_domain::api_key::{CoreKey, CoreKeys};
use agentplane_domain::platform::sandbox_price::SandboxPrice;
use agentplane_domain::pricing::PriceTable;
use agentplane_engine::bus::retention_days_from_env;
use agentplane_engine::runtime::RuntimeTelemetry;
use agentplane_engine::webhooks::{SealKey, WebhookConfig};
use agentplane_engine::{EventBus, ModelClient, ModelConfig, ToolRegistry, TurnEngine};
use agentplane_store::{ResourceNames, Store};
use anyhow::Context;

/// The engine as deployed: sessions, transcripts and events in DynamoDB (large transcripts in
/// S3), an OpenAI-compatible model.
pub type Engine = TurnEngine<Store, ModelClient>;

/// Settings of the live event stream.
#[derive(Clone, Debug)]
pub struct StreamConfig {
    /// A `:` comment at least this often while nothing happens.
    pub keep_alive: Duration,
    /// How often a stream looks for events written by other processes.
    pub poll: Duration,
    /// The `retry:` hint sent to clients, in milliseconds.
    pub retry_ms: u64,
    /// A stream ends after this long (Lambda's ceiling); clients resume with Last-Event-ID.
    pub max_duration: Duration,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            keep_alive: Duration::from_secs(15),
            poll: Duration::from_millis(500),
            retry_ms: 2000,
            max_duration: Duration::from_secs(14 * 60),
        }
    }
}

impl StreamConfig {
    /// The defaults, with `AGENTPLANE_STREAM_MAX_S` (a stream's length; at most the 14-minute
    /// default) and `AGENTPLANE_STREAM_POLL_MS` (how often it looks for other writers' events, at
    /// least 50) when set. A deployment whose gateway buffers streamed answers (LocalStack) sets a
    /// short length, so each stream reaches the client when it ends and the client resumes.
    pub fn from_env() -> Self {
        let read = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok());
        let mut config = Self::default();
        if let Some(s) = read("AGENTPLANE_STREAM_MAX_S") {
            config.max_duration = Duration::from_secs(s.max(1)).min(config.max_duration);
        }
        if let Some(ms) = read("AGENTPLANE_STREAM_POLL_MS") {
            config.poll = Duration::from_millis(ms.max(50));
        }
        config
    }
}

/// How many event streams may be open at once, and how long a stream's hold on its places lasts
/// without renewal (how soon the places of a stream whose process died come back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    /// Open streams per project key (`AGENTPLANE_STREAMS_PER_KEY`, default 100).
    pub per_key: u32,
    /// Open streams per project, all its keys together (`AGENTPLANE_STREAMS_PER_PROJECT`,
    /// default 500).
    pub per_project: u32,
    /// A stream's lease on its places (`AGENTPLANE_STREAM_LEASE_S`, default 60, at least 2);
    /// an open stream renews it every third of it.
    pub lease: Duration,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self { per_key: 100, per_project: 500, lease: Duration::from_secs(60) }
    }
}

impl StreamLimits {
    /// The defaults, with each `AGENTPLANE_STREAMS_PER_KEY`, `AGENTPLANE_STREAMS_PER_PROJECT`
    /// (each at least 1, at most 1000) and `AGENTPLANE_STREAM_LEASE_S` that is set.
    pub fn from_env() -> Self {
        let read = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u32>().ok());
        let mut limits = Self::default();
        if let Some(n) = read("AGENTPLANE_STREAMS_PER_KEY") {
            limits.per_key = n.clamp(1, MAX_STREAM_CAP);
        }
        if let Some(n) = read("AGENTPLANE_STREAMS_PER_PROJECT") {
            limits.per_project = n.clamp(1, MAX_STREAM_CAP);
        }
        if let Some(s) = read("AGENTPLANE_STREAM_LEASE_S") {
            limits.lease = Duration::from_secs(u64::from(s.max(2)));
        }
        limits
    }

    /// How often an open stream renews its lease: a third of it, so two renewals can fail
    /// before the places are lost.
    pub fn renew_every(&self) -> Duration {
        self.lease / 3
    }
}

/// The most a stream cap may be: opening a stream reads every place of its sets.
const MAX_STREAM_CAP: u32 = 1000;

/// `AGENTPLANE_FUNCTION_TIMEOUT_S`: the timeout the template gives this function (set on the
/// functions that run turns); `None` outside Lambda, where nothing kills a turn.
pub fn function_timeout_from_env() -> Option<u64> {
    std::env::var("AGENTPLANE_FUNCTION_TIMEOUT_S").ok().and_then(|v| v.trim().parse().ok()).filter(|s| *s > 0)
}

/// `AGENT_SYNC_TIMEOUT_MS` fitted to this function's timeout; a setting that does not fit is
/// clamped, with a warning in the log.
fn sync_ceiling_from_env() -> u64 {
    let setting = std::env::var("AGENT_SYNC_TIMEOUT_MS").ok();
    let resolved = agentplane_domain::ceilings::sync_ceiling(setting.as_deref(), function_timeout_from_env());
    if let Some(warning) = &resolved.warning {
        tracing::warn!(ceiling_ms = resolved.ms, "{warning}");
    }
    resolved.ms
}

/// `AGENTPLANE_SESSION_TITLE_MODEL`: the cheap model that titles sessions (default
/// `gpt-4o-mini`; `off` turns titles off).
fn title_model_from_env() -> Option<String> {
    match std::env::var("AGENTPLANE_SESSION_TITLE_MODEL") {
        Ok(v) if v.trim().eq_ignore_ascii_case("off") => None,
        Ok(v) if !v.trim().is_empty() => Some(v.trim().to_owned()),
        _ => Some("gpt-4o-mini".to_owned()),
    }
}

#[derive(Clone, Debug)]
pub struct App {
    pub store: Store,
    core_keys: Option<Arc<crate::keys::RotatingKeys>>,
    /// The turn engine, built the first time a handler asks for it ([`App::engine`]): a
    /// function whose route runs no turn never builds it (nor its model client), and its binary
    /// does not link it.
    engine: Arc<OnceLock<Engine>>,
    /// The model the engine calls.
    model: ModelConfig,
    /// What the engine's model calls cost.
    pub prices: Arc<PriceTable>,
    /// The tools agents may name.
    pub tools: Arc<ToolRegistry>,
    /// This process's event bus: turns publish on it, open streams of this process listen.
    pub bus: EventBus,
    pub stream: StreamConfig,
    /// Caps on open event streams per key and per project.
    pub stream_limits: StreamLimits,
    /// The synchronous call ceiling (`AGENT_SYNC_TIMEOUT_MS`, by default 600 s; at most this
    /// function's timeout less a margin, see `agentplane_domain::ceilings`).
    pub sync_ceiling: Duration,
    /// Runtime observation sources, the sampling interval and history settings.
    pub runtime: RuntimeTelemetry,
    /// Webhook secrets' key, whether private addresses may be reached, the delivery timeout.
    pub webhooks: WebhookConfig,
    /// Background runs: slots per tenant, the run ceiling, one invocation's budget.
    pub background: agentplane_engine::background::BackgroundConfig,
    /// The model that titles untitled sessions after their first turn (`None`: off).
    pub title_model: Option<String>,
    /// The bucket names a project may register as Document Store buckets
    /// (`AGENTPLANE_DOCUMENT_BUCKETS`, the template's `DocumentBuckets`: the pattern its IAM
    /// policies grant).
    pub document_buckets: agentplane_domain::bucket::BucketPattern,
    /// The deployment's public base URL (`AGENTPLANE_PUBLIC_URL`, no trailing slash), for the
    /// links it hands out (the A2A card); `None`: see `client::a2a`'s fallbacks.
    pub public_url: Option<String>,
    /// USD per sandbox-second a Platform Run is charged (`AGENTPLANE_SANDBOX_USD_PER_SECOND`,
    /// default 0), captured by each Run when it is created.
    pub sandbox_price: SandboxPrice,
    /// How long Platform Runs wait and rollbacks retry (`AGENTPLANE_RUN_NODE_WAIT_S`,
    /// `AGENTPLANE_ROLLBACK_GIVE_UP_S`).
    pub platform_limits: PlatformLimits,
    /// How long a node token rotated away is still accepted (`AGENTPLANE_NODE_TOKEN_GRACE_S`,
    /// default 600 s).
    pub node_token_grace: Duration,
    /// The key nodes enroll with (`AGENTPLANE_NODE_ENROLLMENT_KEY`, or the secret
    /// `AGENTPLANE_NODE_ENROLLMENT_SECRET_ID` names); `None`: enrollment answers 404.
    pub node_enrollment: Option<Arc<crate::keys::RotatingKeys>>,
    /// Requests per project key per window (`AGENTPLANE_RATE_LIMIT_PER_MINUTE`; `None`: off).
    pub rate_limit: Option<agentplane_domain::quota::RateLimit>,
    /// What a project may hold at once (`AGENTPLANE_MAX_…_PER_PROJECT`).
    pub caps: agentplane_domain::quota::ProjectCaps,
}

/// The Platform's patience: how long a Run waits for a sandbox node before it fails, and how long
/// a rollback's restore is retried before the rollback is given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlatformLimits {
    pub node_wait: std::time::Duration,
    pub rollback_give_up: std::time::Duration,
    /// How long a file operation waits for a rollback under way before it answers 409.
    pub file_wait: std::time::Duration,
}

impl Default for PlatformLimits {
    fn default() -> Self {
        Self {
            node_wait: agentplane_engine::platform::execute::NODE_WAIT,
            rollback_give_up: agentplane_engine::platform::rollback::ROLLBACK_GIVE_UP,
            file_wait: agentplane_engine::platform::rollback::FILE_WAIT,
        }
    }
}

impl PlatformLimits {
    /// `AGENTPLANE_RUN_NODE_WAIT_S` and `AGENTPLANE_ROLLBACK_GIVE_UP_S` (whole seconds, at least
    /// 1); unset or unreadable: the defaults (10 and 15 minutes).
    pub fn from_env() -> Self {
        let seconds = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|s| *s >= 1)
                .map(std::time::Duration::from_secs)
        };
        let default = Self::default();
        Self {
            node_wait: seconds("AGENTPLANE_RUN_NODE_WAIT_S").unwrap_or(default.node_wait),
            rollback_give_up: seconds("AGENTPLANE_ROLLBACK_GIVE_UP_S").unwrap_or(default.rollback_give_up),
            file_wait: default.file_wait,
        }
    }
}

impl App {
    /// An app whose model settings come from the environment; see `with_model` to point it
    /// elsewhere.
    pub fn new(store: Store, core_key: Option<CoreKey>) -> Self {
        let ceiling = sync_ceiling_from_env();
        Self {
            runtime: RuntimeTelemetry::from_env(&store),
            store,
            core_keys: core_key.map(|k| Arc::new(crate::keys::RotatingKeys::fixed(CoreKeys::single(k)))),
            engine: Arc::default(),
            model: ModelConfig::from_env(),
            prices: Arc::new(PriceTable::default()),
            tools: Arc::new(ToolRegistry::builtin()),
            bus: EventBus::new(retention_days_from_env()),
            stream: StreamConfig::default(),
            stream_limits: StreamLimits::from_env(),
            sync_ceiling: Duration::from_millis(ceiling),
            webhooks: local_webhooks(),
            background: agentplane_engine::background::BackgroundConfig::from_env(),
            title_model: title_model_from_env(),
            document_buckets: std::env::var("AGENTPLANE_DOCUMENT_BUCKETS")
                .ok()
                .filter(|p| !p.is_empty())
                .map(agentplane_domain::bucket::BucketPattern::new)
                .unwrap_or_default(),
            public_url: std::env::var("AGENTPLANE_PUBLIC_URL").ok().and_then(|url| public_url(&url)),
            sandbox_price: SandboxPrice::ZERO,
            platform_limits: PlatformLimits::from_env(),
            node_token_grace: std::env::var("AGENTPLANE_NODE_TOKEN_GRACE_S")
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map_or(crate::node::tokens::DEFAULT_GRACE, Duration::from_secs),
            node_enrollment: None,
            rate_limit: crate::quotas::rate_limit_from_env(),
            caps: crate::quotas::caps_from_env(),
        }
    }

    /// Accepts the Core keys `source` holds (a rotation window's two, re-read from a secret).
    pub fn with_core_keys(mut self, source: crate::keys::RotatingKeys) -> Self {
        self.core_keys = Some(Arc::new(source));
        self
    }

    /// Nodes may enroll with the keys `source` holds.
    pub fn with_node_enrollment(mut self, source: crate::keys::RotatingKeys) -> Self {
        self.node_enrollment = Some(Arc::new(source));
        self
    }

    /// A node token rotated away is accepted for `grace` more.
    pub fn with_node_token_grace(mut self, grace: Duration) -> Self {
        self.node_token_grace = grace;
        self
    }

    /// Counts requests per project key against `limit` (`None`: no limit).
    pub fn with_rate_limit(mut self, limit: Option<agentplane_domain::quota::RateLimit>) -> Self {
        self.rate_limit = limit;
        self
    }

    /// Caps what each project may hold at `caps`.
    pub fn with_caps(mut self, caps: agentplane_domain::quota::ProjectCaps) -> Self {
        self.caps = caps;
        self
    }

    /// Platform Runs wait for a node and rollbacks retry as `limits` say.
    pub fn with_platform_limits(mut self, limits: PlatformLimits) -> Self {
        self.platform_limits = limits;
        self
    }

    /// The deployment's ceilings, which bound an agent's Execution settings.
    pub fn ceilings(&self) -> agentplane_domain::ceilings::Ceilings {
        agentplane_domain::ceilings::Ceilings {
            sync_ms: u64::try_from(self.sync_ceiling.as_millis()).unwrap_or(u64::MAX),
            background_ms: self.background.max_duration_ms,
        }
    }

    /// Charges Platform Runs created from now on `price` per sandbox-second.
    pub fn with_sandbox_price(mut self, price: SandboxPrice) -> Self {
        self.sandbox_price = price;
        self
    }

    /// Hands out `url` as the deployment's public base (the local gateway: its listen address,
    /// unless `AGENTPLANE_PUBLIC_URL` says otherwise).
    pub fn with_public_url(mut self, url: &str) -> Self {
        self.public_url = public_url(url);
        self
    }

    /// Titles untitled sessions with `model` after their first turn (`None`: never).
    pub fn with_title_model(mut self, model: Option<String>) -> Self {
        self.title_model = model;
        self
    }

    pub fn with_background(mut self, background: agentplane_engine::background::BackgroundConfig) -> Self {
        self.background = background;
        self
    }

    pub fn with_webhooks(mut self, webhooks: WebhookConfig) -> Self {
        self.webhooks = webhooks;
        self
    }

    pub fn with_model(mut self, config: ModelConfig) -> Self {
        self.model = config;
        self.engine = Arc::default();
        self
    }

    pub fn with_prices(mut self, prices: PriceTable) -> Self {
        self.prices = Arc::new(prices);
        self.engine = Arc::default();
        self
    }

    /// The turn engine over this app's store, model, prices, tools and bus, built on first use.
    pub fn engine(&self) -> &Engine {
        self.engine.get_or_init(|| {
            let images = crate::client::files::view::SessionImages::of(&self.store)
                .map(|images| Arc::new(images) as Arc<dyn agentplane_engine::images::ImageSource>);
            Engine {
                store: self.store.clone(),
                model: ModelClient::new(self.model.clone()),
                tools: self.tools.clone(),
                prices: self.prices.clone(),
                bus: self.bus.clone(),
                images,
                watch: None,
            }
        })
    }

    pub fn with_runtime(mut self, runtime: RuntimeTelemetry) -> Self {
        self.runtime = runtime;
        self
    }

    pub fn with_stream_limits(mut self, limits: StreamLimits) -> Self {
        self.stream_limits = limits;
        self
    }

    pub fn with_stream(mut self, stream: StreamConfig) -> Self {
        self.stream = stream;
        self
    }

    /// From the environment, as Lambda and the local gateway run it. The Core key comes from
    /// `AGENTPLANE_CORE_KEY`, or from the Secrets Manager secret named by
    /// `AGENTPLANE_CORE_KEY_SECRET_ID` (the deployed stack's way: never a literal in the template).
    /// `grants`: the function's, which decide the clients beyond DynamoDB: S3 (transcripts past
    /// the item limit) only for the functions that run turns ([`crate::grants::uses_objects`]),
    /// SQS only for those that use the `runs` queue ([`crate::grants::uses_runs_queue`]).
    pub async fn from_env(grants: &[crate::grants::Grant]) -> anyhow::Result<Self> {
        let sdk = agentplane_store::aws::sdk_config_from_env().await;
        let mut store = Store::new(&sdk, ResourceNames::from_env());
        let objects = crate::grants::uses_objects(grants);
        if objects {
            store = store.with_objects(&sdk);
        }
        if crate::grants::uses_workspaces(grants) {
            store = store.with_workspaces(&sdk);
        }
        if crate::grants::uses_rollbacks_queue(grants) {
            store = store.with_rollbacks_queue(&sdk);
        }
        if crate::grants::uses_runs_queue(grants) {
            store = store.with_runs_queue(&sdk);
        }
        if crate::grants::uses_webhooks_queue(grants) {
            store = store.with_webhooks_queue(&sdk);
        }
        use crate::keys::RotatingKeys;
        let core_keys =
            match (std::env::var("AGENTPLANE_CORE_KEY"), std::env::var("AGENTPLANE_CORE_KEY_SECRET_ID")) {
                (Ok(text), _) => {
                    Some(RotatingKeys::fixed(CoreKeys::parse(&text).context("AGENTPLANE_CORE_KEY")?))
                }
                (_, Ok(secret_id)) => Some(
                    RotatingKeys::refreshing(crate::secrets::from_secrets_manager(&sdk, &secret_id)).await?,
                ),
                _ => None,
            };
        let node_enrollment = match (
            std::env::var("AGENTPLANE_NODE_ENROLLMENT_KEY"),
            std::env::var("AGENTPLANE_NODE_ENROLLMENT_SECRET_ID"),
        ) {
            (Ok(text), _) => {
                Some(RotatingKeys::fixed(CoreKeys::parse(&text).context("AGENTPLANE_NODE_ENROLLMENT_KEY")?))
            }
            (_, Ok(secret_id)) => Some(
                RotatingKeys::refreshing(crate::secrets::from_secrets_manager(&sdk, &secret_id))
                    .await
                    .context("the node enrollment key")?,
            ),
            _ => None,
        };
        let prices = agentplane_engine::prices_from_env().map_err(anyhow::Error::msg)?;
        let mut model = ModelConfig::from_env();
        if let Ok(secret_id) = std::env::var("AGENTPLANE_MODEL_API_KEY_SECRET_ID") {
            model.api_key = Some(secret_string(&sdk, &secret_id).await.context("reading the model API key")?);
        }
        // Deployed functions never use a key of their own making: the key is the deployment's
        // (`AGENTPLANE_WEBHOOK_SECRET_KEY`, or the secret `AGENTPLANE_WEBHOOK_SECRET_KEY_SECRET_ID`
        // names), else webhook routes answer 503.
        let mut webhooks = WebhookConfig::from_env().context("AGENTPLANE_WEBHOOK_SECRET_KEY")?;
        if let Ok(secret_id) = std::env::var("AGENTPLANE_WEBHOOK_SECRET_KEY_SECRET_ID") {
            let text = secret_string(&sdk, &secret_id).await.context("reading the webhook secret key")?;
            let key = Arc::new(SealKey::from_secret_text(&text).context("the webhook secret key")?);
            tokio::spawn(refresh_seal_key(
                key.clone(),
                crate::secrets::from_secrets_manager(&sdk, &secret_id),
            ));
            webhooks.key = Some(key);
        }
        let mut app = Self::new(store, None);
        app.core_keys = core_keys.map(Arc::new);
        app.node_enrollment = node_enrollment.map(Arc::new);
        Ok(app
            .with_sandbox_price(sandbox_price_from_env()?)
            .with_prices(prices)
            .with_model(model)
            .with_webhooks(webhooks)
            .with_stream(StreamConfig::from_env()))
    }

    /// `None` when the deployment configured no Core key: every Core request is then refused.
    pub fn core_keys(&self) -> Option<&crate::keys::RotatingKeys> {
        self.core_keys.as_deref()
    }
}

/// `AGENTPLANE_SANDBOX_USD_PER_SECOND` (unset or empty: 0); a value that is not a plain decimal
/// stops the process from starting rather than charging a price nobody meant.
pub fn sandbox_price_from_env() -> anyhow::Result<SandboxPrice> {
    match std::env::var("AGENTPLANE_SANDBOX_USD_PER_SECOND") {
        Ok(text) if !text.trim().is_empty() => {
            SandboxPrice::parse(text.trim()).context("AGENTPLANE_SANDBOX_USD_PER_SECOND")
        }
        _ => Ok(SandboxPrice::ZERO),
    }
}

/// `url` without its trailing slashes; `None` when that leaves nothing.
fn public_url(url: &str) -> Option<String> {
    Some(url.trim().trim_end_matches('/').to_owned()).filter(|u| !u.is_empty())
}

/// The webhook settings of a process that runs everything itself (the local gateway, tests):
/// `AGENTPLANE_WEBHOOK_SECRET_KEY` when set, else a key of this process's own (secrets sealed
/// under it open only in this process).
fn local_webhooks() -> WebhookConfig {
    let mut config = WebhookConfig::from_env().unwrap_or_else(|err| {
        tracing::warn!(%err, "AGENTPLANE_WEBHOOK_SECRET_KEY is unusable; using a key of this process");
        WebhookConfig::new(None, agentplane_domain::webhook::targets::PrivateTargets::none())
    });
    if config.key.is_none() {
        config.key =
            crate::edge::random::<32>().ok().and_then(|b| SealKey::from_bytes(&b).ok()).map(Arc::new);
    }
    config
}

/// Re-reads the webhook key's secret every `AGENTPLANE_WEBHOOK_KEY_TTL_S` (default 60) while the
/// process lives, so a new key version (README "Rotating secrets") reaches warm functions
/// without a redeploy. An unreadable or unusable text keeps the versions held, with a warning.
async fn refresh_seal_key(key: Arc<SealKey>, fetch: crate::secrets::SecretFetch) {
    let every = std::env::var("AGENTPLANE_WEBHOOK_KEY_TTL_S")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(60), |s| Duration::from_secs(s.max(1)));
    loop {
        tokio::time::sleep(every).await;
        match fetch().await.and_then(|text| SealKey::from_secret_text(&text).map_err(anyhow::Error::from)) {
            Ok(fresh) => key.update(fresh),
            Err(err) => {
                tracing::warn!(error = %format!("{err:#}"), "re-reading the webhook secret key failed; keeping the versions held")
            }
        }
    }
}

async fn secret_string(sdk: &aws_config::SdkConfig, secret_id: &str) -> anyhow::Result<String> {
    crate::secrets::secret_string(&aws_sdk_secretsmanager::Client::new(sdk), secret_id).await
}
