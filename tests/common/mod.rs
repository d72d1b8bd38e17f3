//! The test harness: reuses (or starts) LocalStack, gives every test its own uniquely named
//! tables, buckets and queues, serves the full router on a random loopback port, and hands back
//! a small typed client. Each test reads as: set up, act through the public API, assert.

pub mod model;
pub mod platform;
pub mod sandbox;

use std::sync::OnceLock;
use std::time::Duration;

use agentplane_api::{App, routes};
use agentplane_domain::api_key::CoreKey;
use agentplane_store::{ResourceNames, Store, provision};
use anyhow::{Context, bail};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};

/// The model API key the test apps send; it must never appear in events, answers or logs.
pub const MODEL_KEY: &str = "sk-test-do-not-leak-4242";

pub fn endpoint() -> String {
    std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| "http://127.0.0.1:4566".into())
}

/// Webhook targets for tests whose receivers bind a loopback port the system picks: any
/// loopback port but the emulator's (no deployment can be configured so; see
/// `tests/attack_webhook_ssrf.rs` for the allow-list a deployment has).
pub fn loopback_receivers() -> agentplane_domain::webhook::targets::PrivateTargets {
    let targets = agentplane_domain::webhook::targets::PrivateTargets::any_loopback_port();
    match agentplane_engine::webhooks::url_port(&endpoint()) {
        Some(port) => targets.refusing(port, "the AWS endpoint"),
        None => targets,
    }
}

fn repo_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Makes sure LocalStack answers, starting it with the repo's script the first time if needed.
pub fn ensure_emulator() -> anyhow::Result<()> {
    static STARTED: OnceLock<Result<(), String>> = OnceLock::new();
    STARTED
        .get_or_init(|| {
            let health = format!("{}/_localstack/health", endpoint());
            let up = || {
                std::process::Command::new("curl")
                    .args(["-fsS", "--max-time", "2", &health])
                    .output()
                    .is_ok_and(|o| o.status.success())
            };
            if up() {
                return Ok(());
            }
            let status = std::process::Command::new("bash")
                .arg(repo_root().join("localstack/emulator.sh"))
                .arg("start")
                .status()
                .map_err(|e| e.to_string())?;
            if status.success() { Ok(()) } else { Err("localstack/emulator.sh start failed".into()) }
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

/// A fresh, unique resource prefix: lowercase so that bucket names stay valid.
pub fn unique_prefix() -> String {
    format!("t{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

/// Storage clients on freshly provisioned resources of their own (the `runs` queue included).
pub async fn fresh_store() -> anyhow::Result<Store> {
    ensure_emulator()?;
    let sdk = agentplane_store::aws::emulator_sdk_config(&endpoint()).await;
    let names = ResourceNames::with_prefix(&unique_prefix());
    provision::provision(&sdk, &names).await.context("provisioning test resources")?;
    Ok(Store::new(&sdk, names)
        .with_objects(&sdk)
        .with_workspaces(&sdk)
        .with_runs_queue(&sdk)
        .with_webhooks_queue(&sdk)
        .with_rollbacks_queue(&sdk))
}

pub struct TestApp {
    /// The app behind the server (its store, engine and event bus).
    pub app: App,
    pub base: String,
    pub http: reqwest::Client,
    pub core_key: String,
    pub store: Store,
}

/// The in-process jobs a test app runs beside its router.
struct Jobs {
    /// The `runs` queue's consumer.
    runs: bool,
    /// The webhook retry job, every `AGENTPLANE_WEBHOOK_RETRY_INTERVAL_S`.
    webhook_retry: bool,
}

/// The app every test starts from: the deployment's defaults, with a rate limit far above what
/// any test sends (every request still goes through the counted key check; tests of the limit
/// set their own).
fn base_app(store: &Store, core_key: &str) -> App {
    App::new(store.clone(), CoreKey::new(core_key.to_owned()))
        .with_rate_limit(Some(agentplane_domain::quota::RateLimit { max: 1_000_000, window_s: 60 }))
}

/// A project with one working key.
pub struct Tenant {
    pub project_id: String,
    pub key_id: String,
    pub key: String,
}

impl TestApp {
    pub async fn spawn() -> anyhow::Result<Self> {
        let store = fresh_store().await?;
        Self::serve(store).await
    }

    pub async fn serve(store: Store) -> anyhow::Result<Self> {
        let core_key = format!("core_test_{}", uuid::Uuid::new_v4().simple());
        let app = base_app(&store, &core_key);
        Self::serve_app(app, store, core_key).await
    }

    /// An app on fresh resources, adjusted by `configure` before it serves (runtime sources,
    /// sampler settings, …).
    pub async fn spawn_with(configure: impl FnOnce(App) -> App) -> anyhow::Result<Self> {
        let store = fresh_store().await?;
        let core_key = format!("core_test_{}", uuid::Uuid::new_v4().simple());
        let app = configure(base_app(&store, &core_key));
        Self::serve_app(app, store, core_key).await
    }

    /// An app whose agents talk to `model` (fast retries, short timeouts, a 1 s keep-alive).
    pub async fn spawn_with_model(model: &model::ScriptedModel) -> anyhow::Result<Self> {
        Self::serve_with_model(fresh_store().await?, model).await
    }

    /// `spawn_with_model`, the app adjusted by `configure` before it serves.
    pub async fn spawn_with_model_and(
        model: &model::ScriptedModel,
        configure: impl FnOnce(App) -> App,
    ) -> anyhow::Result<Self> {
        let store = fresh_store().await?;
        let this = Self::serve_with_model_unstarted(store, model);
        let (app, store, core_key) = this;
        Self::serve_app(configure(app), store, core_key).await
    }

    fn serve_with_model_unstarted(store: Store, model: &model::ScriptedModel) -> (App, Store, String) {
        let core_key = format!("core_test_{}", uuid::Uuid::new_v4().simple());
        // Titles off: a test's scripted model answers its turns only (tests/titles.rs turns
        // them on).
        let app = base_app(&store, &core_key)
            .with_title_model(None)
            .with_model(agentplane_engine::ModelConfig {
                base_url: model.base_url.clone(),
                api_key: Some(MODEL_KEY.into()),
                call_timeout: Duration::from_secs(3),
                max_retries: 2,
                initial_backoff: Duration::from_millis(20),
            })
            .with_stream(agentplane_api::app::StreamConfig {
                keep_alive: Duration::from_secs(1),
                poll: Duration::from_millis(200),
                retry_ms: 1000,
                max_duration: Duration::from_secs(120),
            });
        (app, store, core_key)
    }

    /// `spawn_with_model` on a given store (one that counts its requests, say).
    pub async fn serve_with_model(store: Store, model: &model::ScriptedModel) -> anyhow::Result<Self> {
        Self::serve_with_model_and(store, model, |app| app).await
    }

    /// `serve_with_model`, the app adjusted by `configure` before it serves (webhook settings,
    /// say).
    pub async fn serve_with_model_and(
        store: Store,
        model: &model::ScriptedModel,
        configure: impl FnOnce(App) -> App,
    ) -> anyhow::Result<Self> {
        let (app, store, core_key) = Self::serve_with_model_unstarted(store, model);
        Self::serve_app(configure(app), store, core_key).await
    }

    /// `serve_with_model_and` without the webhook retry job: nothing of its own touches the
    /// store between requests (tests that count a request's storage calls, and that nothing
    /// comes after its answer).
    pub async fn serve_with_model_and_without_webhook_retry(
        store: Store,
        model: &model::ScriptedModel,
        configure: impl FnOnce(App) -> App,
    ) -> anyhow::Result<Self> {
        let (app, store, core_key) = Self::serve_with_model_unstarted(store, model);
        Self::serve_app_with(configure(app), store, core_key, Jobs { runs: true, webhook_retry: false }).await
    }

    /// `spawn_with_model` whose `runs` queue nobody consumes: the test executes Runs itself
    /// (and can drop an execution mid-way, as a crashed executor would).
    pub async fn spawn_with_model_without_runs_consumer(
        model: &model::ScriptedModel,
    ) -> anyhow::Result<Self> {
        let (app, store, core_key) = Self::serve_with_model_unstarted(fresh_store().await?, model);
        Self::serve_app_with(app, store, core_key, Jobs { runs: false, webhook_retry: true }).await
    }

    /// `spawn_with_model_without_runs_consumer`, the app adjusted by `configure` before it
    /// serves.
    pub async fn spawn_with_model_without_runs_consumer_and(
        model: &model::ScriptedModel,
        configure: impl FnOnce(App) -> App,
    ) -> anyhow::Result<Self> {
        let (app, store, core_key) = Self::serve_with_model_unstarted(fresh_store().await?, model);
        Self::serve_app_with(configure(app), store, core_key, Jobs { runs: false, webhook_retry: true }).await
    }

    /// An app on fresh resources whose `runs` queue nobody consumes: what is queued stays
    /// queued (tests of queued platform Runs).
    pub async fn spawn_without_runs_consumer() -> anyhow::Result<Self> {
        Self::spawn_without_runs_consumer_and(|app| app).await
    }

    /// `spawn_without_runs_consumer`, the app adjusted by `configure` before it serves.
    pub async fn spawn_without_runs_consumer_and(configure: impl FnOnce(App) -> App) -> anyhow::Result<Self> {
        let store = fresh_store().await?;
        let core_key = format!("core_test_{}", uuid::Uuid::new_v4().simple());
        let app = configure(base_app(&store, &core_key));
        Self::serve_app_with(app, store, core_key, Jobs { runs: false, webhook_retry: true }).await
    }

    async fn serve_app(app: App, store: Store, core_key: String) -> anyhow::Result<Self> {
        Self::serve_app_with(app, store, core_key, Jobs { runs: true, webhook_retry: true }).await
    }

    async fn serve_app_with(app: App, store: Store, core_key: String, jobs: Jobs) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        tokio::spawn(agentplane_api::serve_http(
            listener,
            routes::full_router(app.clone()),
            std::future::pending(),
        ));
        // The run-execution job in-process, on this app's own queue (a no-op without one).
        if jobs.runs {
            tokio::spawn(agentplane_api::jobs::consume_runs_forever(app.clone()));
        }
        // The rollback-restore job too.
        tokio::spawn(agentplane_api::jobs::consume_rollbacks_forever(app.clone()));
        // The webhook jobs too: the queue's consumer, and the retry job every
        // AGENTPLANE_WEBHOOK_RETRY_INTERVAL_S (a minute unless set).
        tokio::spawn(agentplane_api::jobs::consume_webhooks_forever(app.clone()));
        if jobs.webhook_retry {
            tokio::spawn(agentplane_api::jobs::retry_forever(
                app.clone(),
                agentplane_api::jobs::retry_interval_from_env(),
            ));
        }
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
        Ok(Self { app, base, http, core_key, store })
    }

    /// Waits until this app's queues (runs, webhooks, rollbacks) hold nothing: no message
    /// visible, in flight or delayed, on two readings in a row (a consumer may enqueue the next
    /// step just as it deletes its own message). What a test asserts "did not happen" after this
    /// could only have happened through a queue that is now empty.
    pub async fn drained(&self) -> anyhow::Result<()> {
        let sqs = aws_sdk_sqs::Client::new(&agentplane_store::aws::emulator_sdk_config(&endpoint()).await);
        let names = &self.store.names;
        let mut urls = Vec::new();
        for queue in [&names.runs_queue, &names.webhooks_queue, &names.rollbacks_queue] {
            urls.push(sqs.get_queue_url().queue_name(queue).send().await?.queue_url.unwrap_or_default());
        }
        let started = std::time::Instant::now();
        let mut empty_in_a_row = 0;
        loop {
            let mut held = 0;
            for url in &urls {
                use aws_sdk_sqs::types::QueueAttributeName as A;
                let attrs = sqs
                    .get_queue_attributes()
                    .queue_url(url)
                    .attribute_names(A::ApproximateNumberOfMessages)
                    .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
                    .attribute_names(A::ApproximateNumberOfMessagesDelayed)
                    .send()
                    .await?
                    .attributes
                    .unwrap_or_default();
                held += attrs.values().filter_map(|v| v.parse::<u64>().ok()).sum::<u64>();
            }
            empty_in_a_row = if held == 0 { empty_in_a_row + 1 } else { 0 };
            if empty_in_a_row == 2 {
                return Ok(());
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(60),
                "the queues still hold {held} messages"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// One retention-sweep pass now (expiring due actions), rather than waiting for a schedule.
    pub async fn sweep(&self) -> anyhow::Result<agentplane_api::jobs::SweepReport> {
        Ok(agentplane_api::jobs::sweep_once(&self.app.store, agentplane_api::edge::now()).await?)
    }

    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, format!("{}{path}", self.base))
    }

    /// A request to the Core admin API with the Core key.
    pub fn core(&self, method: Method, path: &str) -> RequestBuilder {
        self.request(method, path).bearer_auth(&self.core_key)
    }

    /// A request to the client API with a project key.
    pub fn client(&self, key: &str, method: Method, path: &str) -> RequestBuilder {
        self.request(method, &format!("/api/client/v1{path}")).bearer_auth(key)
    }

    pub async fn create_project(&self, name: &str) -> anyhow::Result<String> {
        let (status, body) =
            send(self.core(Method::POST, "/core/v1/projects").json(&json!({ "name": name }))).await?;
        if status != StatusCode::CREATED {
            bail!("create project: {status} {body}");
        }
        str_field(&body, "id")
    }

    pub async fn create_key(&self, project_id: &str) -> anyhow::Result<(String, String)> {
        let path = format!("/core/v1/projects/{project_id}/api_keys");
        let (status, body) = send(self.core(Method::POST, &path).json(&json!({ "name": "test" }))).await?;
        if status != StatusCode::CREATED {
            bail!("create key: {status} {body}");
        }
        Ok((str_field(&body, "id")?, str_field(&body, "key")?))
    }

    /// Creates an agent and returns its id.
    pub async fn create_agent(&self, key: &str, body: Value) -> anyhow::Result<String> {
        let (status, answer) = send(self.client(key, Method::POST, "/agents").json(&body)).await?;
        if status != StatusCode::CREATED {
            bail!("create agent: {status} {answer}");
        }
        str_field(&answer, "id")
    }

    pub async fn tenant(&self) -> anyhow::Result<Tenant> {
        let project_id = self.create_project("tenant").await?;
        let (key_id, key) = self.create_key(&project_id).await?;
        Ok(Tenant { project_id, key_id, key })
    }
}

/// Sends and returns the status and the JSON body (`Value::Null` for an empty or non-JSON one).
pub async fn send(request: RequestBuilder) -> anyhow::Result<(StatusCode, Value)> {
    let response = request.send().await?;
    let status = response.status();
    let text = response.text().await?;
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// Sends and returns status, the Cache-Control header and the JSON body.
pub async fn send_with_cache(request: RequestBuilder) -> anyhow::Result<(StatusCode, Option<String>, Value)> {
    let response = request.send().await?;
    let status = response.status();
    let cache = response.headers().get("cache-control").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let text = response.text().await?;
    Ok((status, cache, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

pub fn str_field(body: &Value, field: &str) -> anyhow::Result<String> {
    body.get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .with_context(|| format!("no `{field}` in {body}"))
}

/// The `error.code` of an agent-runtime/Core envelope.
pub fn error_code(body: &Value) -> Option<&str> {
    body.pointer("/error/code").and_then(Value::as_str)
}

/// `(status, &body)` of an answer, the shape [`assert_error`] takes.
pub trait Pair {
    fn as_ref_pair(&self) -> (StatusCode, &Value);
}

impl Pair for (StatusCode, Value) {
    fn as_ref_pair(&self) -> (StatusCode, &Value) {
        (self.0, &self.1)
    }
}

/// Asserts a status and an envelope code together, with the body in the message.
#[track_caller]
pub fn assert_error(actual: (StatusCode, &Value), status: StatusCode, code: &str) {
    assert_eq!(actual.0, status, "body: {}", actual.1);
    assert_eq!(error_code(actual.1), Some(code), "body: {}", actual.1);
    assert!(actual.1.pointer("/error/type").and_then(Value::as_str).is_some(), "no error.type: {}", actual.1);
    assert!(
        actual.1.pointer("/error/message").and_then(Value::as_str).is_some(),
        "no error.message: {}",
        actual.1
    );
}

/// A sandbox node daemon running in the test process against a `TestApp`, with its own state
/// directory. `restart` stops the daemon and starts a new connection; sandboxes and their
/// processes survive, as they would a real daemon restart.
pub struct TestNode {
    pub node_id: String,
    pub config: agentplane_sandbox::NodeConfig,
    /// The base URL of the daemon's envd (empty: none).
    pub envd_url: String,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl TestNode {
    pub async fn start(app: &TestApp) -> anyhow::Result<Self> {
        let (status, body) =
            send(app.core(Method::POST, "/core/v1/sandbox/nodes").json(&json!({"name": "test"}))).await?;
        if status != StatusCode::CREATED {
            bail!("register node: {status} {body}");
        }
        // A sandbox's unprivileged uid must be able to reach its workspace: use the temporary
        // directory unless it is closed to others (as a TMPDIR under /root would be).
        let mut base = std::env::temp_dir();
        if agentplane_sandbox::local::jail::untraversable(&base).is_some() {
            base = "/tmp".into();
        }
        let state_dir = base.join(format!("agentplane-test-{}", unique_prefix()));
        // envd on a loopback port of its own, bound here so the test knows it.
        let envd = std::net::TcpListener::bind("127.0.0.1:0")?;
        let envd_url = format!("http://{}", envd.local_addr()?);
        let envd = agentplane_sandbox::daemon::envd::Listen::Bound(std::sync::Arc::new(envd));
        let config = agentplane_sandbox::NodeConfig {
            core_url: app.base.clone(),
            token: str_field(&body, "token")?,
            enrollment: None,
            rotation: Default::default(),
            state_dir,
            heartbeat_every: Duration::from_secs(1),
            workspace_limits: Default::default(),
            disk_size_mb: agentplane_sandbox::local::DEFAULT_DISK_MB,
            envd: Some(envd),
        };
        let mut node = Self { node_id: str_field(&body, "id")?, config, envd_url, task: None };
        node.run();
        node.wait_online(app).await?;
        Ok(node)
    }

    /// A daemon that enrolls itself with `key` under `name` (no token configured) in a state
    /// directory of its own; `node_id` is that of the node it enrolled as.
    pub async fn enroll(app: &TestApp, key: &str, name: &str) -> anyhow::Result<Self> {
        let mut base = std::env::temp_dir();
        if agentplane_sandbox::local::jail::untraversable(&base).is_some() {
            base = "/tmp".into();
        }
        let config = agentplane_sandbox::NodeConfig {
            core_url: app.base.clone(),
            token: String::new(),
            enrollment: Some(agentplane_sandbox::Enrollment { key: key.to_owned(), name: name.to_owned() }),
            rotation: Default::default(),
            state_dir: base.join(format!("agentplane-test-{}", unique_prefix())),
            heartbeat_every: Duration::from_secs(1),
            workspace_limits: Default::default(),
            disk_size_mb: agentplane_sandbox::local::DEFAULT_DISK_MB,
            envd: None,
        };
        let mut node = Self { node_id: String::new(), config, envd_url: String::new(), task: None };
        node.run();
        for _ in 0..100 {
            let named = app
                .store
                .nodes()
                .all()
                .await?
                .into_iter()
                .find(|n| n.name == name && n.last_seen_at.is_some());
            if let Some(found) = named {
                node.node_id = found.id.to_string();
                return Ok(node);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("the enrolled node never came online")
    }

    /// The token the daemon keeps in its state directory (what it enrolled with or rotated to).
    pub fn kept_token(&self) -> anyhow::Result<Option<String>> {
        match std::fs::read_to_string(self.config.state_dir.join("node-token.json")) {
            Ok(text) => Ok(serde_json::from_str::<Value>(&text)?["token"].as_str().map(str::to_owned)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    fn run(&mut self) {
        let config = self.config.clone();
        self.task = Some(tokio::spawn(async move {
            let _ = agentplane_sandbox::run(config).await;
        }));
    }

    async fn wait_online(&self, app: &TestApp) -> anyhow::Result<()> {
        let id: agentplane_domain::ids::NodeId = self.node_id.parse()?;
        for _ in 0..100 {
            if app.store.nodes().get(&id).await?.last_seen_at.is_some() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("the test node never came online")
    }

    /// Stops the daemon (not its sandboxes) and starts it again as a new connection.
    pub async fn restart(&mut self, app: &TestApp) -> anyhow::Result<()> {
        self.stop().await;
        let id: agentplane_domain::ids::NodeId = self.node_id.parse()?;
        let before = app.store.nodes().get(&id).await?.connection_id;
        self.run();
        for _ in 0..100 {
            if app.store.nodes().get(&id).await?.connection_id != before {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("the restarted node never heartbeated")
    }

    pub async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for TestNode {
    /// Stops the daemon and ends whatever sandboxes a test left behind (a failed assertion
    /// before its own cleanup), so none outlives it: killing a sandbox's bubblewrap init ends
    /// its PID namespace and every process in it; the emptied cgroups are then removed.
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        let sandboxes: Vec<String> = std::fs::read_dir(self.config.state_dir.join("sandboxes"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        for id in &sandboxes {
            agentplane_sandbox::local::end_leftover(&self.config.state_dir, id);
        }
        let _ = std::fs::remove_dir_all(&self.config.state_dir);
    }
}

impl TestApp {
    /// A request to the sandbox API with a project key in `X-API-Key`.
    pub fn sandbox(&self, key: &str, method: Method, path: &str) -> RequestBuilder {
        self.request(method, &format!("/sandbox/v1{path}")).header("X-API-Key", key)
    }

    /// A request to the Platform API (`/v1`) with a project key as its bearer token.
    pub fn v1(&self, key: &str, method: Method, path: &str) -> RequestBuilder {
        self.request(method, &format!("/v1{path}")).bearer_auth(key)
    }

    /// Creates a Platform resource with an empty body (an environment, a session of one): its id.
    pub async fn made(&self, key: &str, path: &str) -> anyhow::Result<String> {
        let (status, body) = send(self.v1(key, Method::POST, path).json(&json!({}))).await?;
        anyhow::ensure!(status == StatusCode::CREATED, "{path}: {body}");
        Ok(body["data"]["id"].as_str().unwrap_or_default().to_owned())
    }
}

/// Binds a fixed address (the deployed smoke suite's model and webhook receiver), retrying for
/// up to 30 s: a fixed port in the ephemeral range can be the local port of a short-lived
/// outgoing connection for a moment (found in CI: `Address already in use` right after the
/// deploy's uploads).
pub async fn bind_fixed(addr: &str) -> anyhow::Result<tokio::net::TcpListener> {
    let started = std::time::Instant::now();
    loop {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => return Ok(listener),
            Err(err)
                if err.kind() == std::io::ErrorKind::AddrInUse
                    && started.elapsed() < Duration::from_secs(30) =>
            {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(err) => return Err(anyhow::anyhow!("bind {addr}: {err}")),
        }
    }
}
