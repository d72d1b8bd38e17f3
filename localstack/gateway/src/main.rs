//! The local gateway: every route of every surface on one port, with the same handlers the
//! Lambda functions run, against LocalStack. Jobs run in-process as they are added.
//!
//! Configuration (environment):
//! - `AGENTPLANE_LISTEN`: address to serve on (default `127.0.0.1:8080`).
//! - `AGENTPLANE_CORE_KEY`: the Core admin key (or, to rehearse a rotation, the JSON
//!   `{"current","previous","previous_until"}` a rotated secret holds); when unset, one is generated once and kept in
//!   `.agentplane/core-key` (git-ignored, 0600; see `secrets`) so that it survives restarts.
//! - `AWS_ENDPOINT_URL`: the emulator (default `http://127.0.0.1:4566`).
//! - `AGENTPLANE_RESOURCE_PREFIX`: resource name prefix (default `agentplane`).
//! - `AGENTPLANE_MODEL_BASE_URL`, `AGENTPLANE_MODEL_API_KEY`: the model behind agents.
//! - `AGENTPLANE_PRICES_FILE`: token prices (JSON), else built-in defaults.
//! - `AGENTPLANE_EMBEDDED_NODE`: `0` to not start the embedded sandbox node (default: started,
//!   workspaces under `.agentplane/node/`), so that the sandbox API works out of the box.
//! - `AGENTPLANE_SAMPLING_INTERVAL_S`: how often the in-process sampler runs (default 30);
//!   `AGENTPLANE_SAMPLER=off` turns it (and Runtime history) off.
//! - `AGENTPLANE_SWEEP_INTERVAL_S`: how often the in-process retention sweep runs (default 60).
//! - `AGENTPLANE_WEBHOOK_SECRET_KEY`: the key sealing webhook signing secrets (base64 of 32
//!   bytes, or the versions object `{"current": N, "keys": {…}}`: a re-seal pass runs at start);
//!   when unset, one
//!   is generated once and kept in `.agentplane/webhook-key` (git-ignored, 0600), so that
//!   endpoints keep signing across restarts.
//! - `AGENTPLANE_WEBHOOKS_ALLOWED_PRIVATE`: the loopback or private receivers webhooks may reach,
//!   `host:port,…` (default: none, as deployed); never the AWS endpoint's port or this
//!   gateway's (see `webhooks`).
//! - `AGENTPLANE_PUBLIC_URL`: the base URL clients reach this gateway at, for the links it
//!   hands out (the A2A card); default `http://` + the listen address (`127.0.0.1` for an
//!   unspecified one), never a request's `Host`.
//! - `AGENTPLANE_RUNS_QUEUE_URL`: the `runs` queue's URL, when it should not be looked up by name.
//! - `AGENTPLANE_HTTP_HEADER_TIMEOUT_S`, `AGENTPLANE_HTTP_BODY_TIMEOUT_S`,
//!   `AGENTPLANE_HTTP_IDLE_TIMEOUT_S`: the server's timeouts (default 10, 30, 60; see `server`).

use std::path::PathBuf;

use agentplane_api::{App, edge, routes};
use agentplane_domain::api_key::{CoreKey, CoreKeys};
use agentplane_store::{ResourceNames, Store, provision};
use anyhow::{Context, bail};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_init();
    let listen = std::env::var("AGENTPLANE_LISTEN").unwrap_or_else(|_| "127.0.0.1:8080".into());
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| "http://127.0.0.1:4566".into());
    let sdk = agentplane_store::aws::emulator_sdk_config(&endpoint).await;
    let names = ResourceNames::from_env();
    provision::provision(&sdk, &names).await.with_context(|| {
        format!(
            "provisioning resources at {endpoint} (is LocalStack running? bash localstack/emulator.sh start)"
        )
    })?;
    let store = Store::new(&sdk, names)
        .with_objects(&sdk)
        .with_workspaces(&sdk)
        .with_runs_queue(&sdk)
        .with_webhooks_queue(&sdk)
        .with_rollbacks_queue(&sdk);
    let timeouts = agentplane_local::server::HttpTimeouts::from_env()?;
    secrets().prepare()?;
    let core_keys = core_keys()?;
    let core_key = core_keys.current().clone();
    let prices = agentplane_engine::prices_from_env().map_err(anyhow::Error::msg)?;
    let mut app = App::new(store, None)
        .with_core_keys(agentplane_api::keys::RotatingKeys::fixed(core_keys))
        .with_sandbox_price(agentplane_api::app::sandbox_price_from_env()?)
        .with_prices(prices)
        .with_webhooks(webhooks(&listen, &endpoint)?);
    if app.public_url.is_none() {
        app = app.with_public_url(&agentplane_local::public_url(&listen));
    }
    if app.runtime.history_enabled {
        tokio::spawn(sampler(app.clone()));
    }
    tokio::spawn(placer(app.clone()));
    // The webhook-reseal job's pass, once at start: after AGENTPLANE_WEBHOOK_SECRET_KEY gained a
    // new current version, every endpoint's secret moves to it (a no-op otherwise).
    tokio::spawn({
        let app = app.clone();
        async move {
            if let Err(err) =
                agentplane_api::jobs::webhook_reseal_once(&app, std::time::Duration::from_secs(3600)).await
            {
                tracing::warn!(error = %err, "webhook re-seal pass failed");
            }
        }
    });
    // The count-backfill job's pass, once at start: a state folder an older version wrote gets
    // its environments and files counted (a no-op once through).
    tokio::spawn({
        let app = app.clone();
        async move {
            if let Err(err) =
                agentplane_api::jobs::count_backfill_once(&app, std::time::Duration::from_secs(3600)).await
            {
                tracing::warn!(error = %err, "count backfill pass failed");
            }
        }
    });
    // The run-execution and retention-sweep jobs, in-process.
    tokio::spawn(agentplane_api::jobs::consume_runs_forever(app.clone()));
    tokio::spawn(agentplane_api::jobs::sweep_forever(
        app.clone(),
        agentplane_api::jobs::sweep_interval_from_env(),
    ));
    // The rollback-restore job (the rollbacks queue), in-process.
    tokio::spawn(agentplane_api::jobs::consume_rollbacks_forever(app.clone()));
    // The webhook-delivery (queue) and webhook-retry (timer) jobs, in-process.
    tokio::spawn(agentplane_api::jobs::consume_webhooks_forever(app.clone()));
    tokio::spawn(agentplane_api::jobs::retry_forever(
        app.clone(),
        agentplane_api::jobs::retry_interval_from_env(),
    ));
    let listener =
        tokio::net::TcpListener::bind(&listen).await.with_context(|| format!("binding {listen}"))?;
    announce(&listen, &core_key);
    let (node, envd) = if std::env::var("AGENTPLANE_EMBEDDED_NODE").as_deref() == Ok("0") {
        (None, None)
    } else {
        let (node, envd) = embedded_node(&app, &listen).await?;
        (Some(node), envd)
    };
    let served = axum_serve(listener, app, envd, timeouts).await;
    drop(node);
    served
}

/// Registers (once; the token is kept in `.agentplane/node-token`) and runs a sandbox node in
/// this process. It talks to the gateway over HTTP like any other node.
///
/// Its envd listens on `AGENTPLANE_NODE_ENVD_ADDR` when that is set, else on an ephemeral
/// loopback port; either way the gateway forwards requests carrying `E2b-Sandbox-Id` to it, so
/// `E2B_SANDBOX_URL` set to the gateway's URL reaches it.
async fn embedded_node(
    app: &App,
    listen: &str,
) -> anyhow::Result<(tokio::task::JoinHandle<()>, Option<std::net::SocketAddr>)> {
    use agentplane_domain::api_key::KeyHash;
    use agentplane_domain::ids::NodeId;
    use agentplane_domain::sandbox::{Node, NodeTokenSecret};

    let saved = secrets().read("node-token")?.map(|secret| secret.text);
    let token = match saved {
        Some(token) if app.store.nodes().authenticate(&KeyHash::of(&token), edge::now()).await?.is_some() => {
            token
        }
        _ => {
            let secret = NodeTokenSecret::from_random(edge::random().context("randomness")?);
            let node = Node {
                id: NodeId::from_random(edge::random().context("randomness")?),
                name: "embedded".into(),
                created_at: edge::now(),
                connection_id: None,
                last_seen_at: None,
                host: None,
            };
            app.store.nodes().register(&node, &secret.hash()).await?;
            secrets().write("node-token", secret.expose())?;
            secret.expose().to_owned()
        }
    };
    use agentplane_sandbox::daemon::envd::Listen;
    let envd = match std::env::var_os("AGENTPLANE_NODE_ENVD_ADDR") {
        Some(_) => agentplane_sandbox::daemon::envd::listen_from_env()?,
        None => None,
    };
    let envd = match envd {
        Some(Listen::Addr(addr)) => {
            std::net::TcpListener::bind(addr).with_context(|| format!("binding envd on {addr}"))?
        }
        _ => std::net::TcpListener::bind("127.0.0.1:0").context("binding envd")?,
    };
    let envd_addr = envd.local_addr()?;
    tracing::info!(%envd_addr, "the embedded node's envd (reached through the gateway with E2b-Sandbox-Id)");
    let envd = Listen::Bound(std::sync::Arc::new(envd));
    let config = agentplane_sandbox::NodeConfig {
        core_url: format!("http://{listen}"),
        token,
        enrollment: None,
        // The gateway keeps the embedded node's token itself (`.agentplane/node-token`).
        rotation: Default::default(),
        state_dir: node_state_dir(),
        heartbeat_every: std::time::Duration::from_secs(5),
        workspace_limits: agentplane_sandbox::local::workspace::Limits::from_env(),
        disk_size_mb: agentplane_sandbox::disk_size_mb_from_env()?,
        envd: Some(envd),
    };
    Ok((
        tokio::spawn(async move {
            if let Err(err) = agentplane_sandbox::run(config).await {
                tracing::error!(error = %err, "the embedded sandbox node stopped");
            }
        }),
        Some(envd_addr),
    ))
}

async fn axum_serve(
    listener: tokio::net::TcpListener,
    app: App,
    envd: Option<std::net::SocketAddr>,
    timeouts: agentplane_local::server::HttpTimeouts,
) -> anyhow::Result<()> {
    let router = agentplane_local::envd_proxy::layer(routes::full_router(app), envd);
    agentplane_local::server::serve(listener, router, timeouts, shutdown()).await?;
    Ok(())
}

/// The sampler job, in-process: one pass at the start of every sampling interval.
async fn sampler(app: App) {
    let seconds = u64::try_from(app.runtime.interval.seconds()).unwrap_or(30);
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(seconds));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        match agentplane_engine::runtime::sample_once(&app.store, &app.runtime, edge::now()).await {
            Ok(report) => tracing::debug!(?report, "sampler pass"),
            Err(err) => tracing::warn!(error = %err, "sampler pass failed"),
        }
    }
}

/// The placer job, in-process: one pass a minute.
async fn placer(app: App) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        match agentplane_api::sandbox::managed::reconcile(&app, edge::now()).await {
            Ok(report) => tracing::debug!(?report, "placer pass"),
            Err(err) => tracing::warn!(error = %err, "placer pass failed"),
        }
    }
}

async fn shutdown() {
    let _ = tokio::signal::ctrl_c().await;
}

fn state_dir() -> PathBuf {
    std::env::var_os("AGENTPLANE_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.agentplane"))
}

/// Where the embedded node keeps sandboxes: `.agentplane/node`, unless a sandbox's unprivileged
/// uid could not reach it there (a checkout under `/root`, say): then a directory of its own.
fn node_state_dir() -> PathBuf {
    let preferred = state_dir().join("node");
    match agentplane_sandbox::local::host_problem(&preferred) {
        Some(agentplane_sandbox::local::HostProblem::StateDirClosed(closed)) => {
            let fallback = PathBuf::from("/var/lib/agentplane-local/node");
            tracing::warn!(%closed, fallback = %fallback.display(), "the checkout is closed to other users: sandboxes live in the fallback directory");
            fallback
        }
        _ => preferred,
    }
}

/// The secrets in the state folder (`.agentplane/`), each 0600.
fn secrets() -> agentplane_local::secrets::StateDir {
    agentplane_local::secrets::StateDir::new(state_dir())
}

fn core_keys() -> anyhow::Result<CoreKeys> {
    if let Ok(text) = std::env::var("AGENTPLANE_CORE_KEY") {
        return CoreKeys::parse(&text).context("AGENTPLANE_CORE_KEY");
    }
    let text = secrets().read_or_create("core-key", || {
        Ok(CoreKey::from_random(edge::random().context("reading randomness")?).expose().to_owned())
    })?;
    match CoreKey::new(text) {
        Some(key) => Ok(CoreKeys::single(key)),
        None => bail!(
            "{} holds no usable key; delete it to get a new one",
            state_dir().join("core-key").display()
        ),
    }
}

fn webhooks(listen: &str, aws_endpoint: &str) -> anyhow::Result<agentplane_engine::webhooks::WebhookConfig> {
    use agentplane_engine::webhooks::{SealKey, WebhookConfig};
    let mut config = WebhookConfig::from_env()?;
    let list = std::env::var("AGENTPLANE_WEBHOOKS_ALLOWED_PRIVATE").unwrap_or_default();
    config.targets = agentplane_local::webhooks::targets(&list, listen, aws_endpoint)?;
    if config.key.is_none() {
        let text = secrets().read_or_create("webhook-key", || {
            let bytes: [u8; 32] = edge::random().context("reading randomness")?;
            Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
        })?;
        let key = SealKey::from_secret_text(&text).with_context(|| {
            format!(
                "{} holds no usable key; delete it to get a new one",
                state_dir().join("webhook-key").display()
            )
        })?;
        config.key = Some(std::sync::Arc::new(key));
    }
    Ok(config)
}

#[allow(clippy::print_stdout)]
fn announce(listen: &str, key: &CoreKey) {
    println!("Agentplane is serving every route on http://{listen}");
    println!("Core key: {}", key.expose());
    println!("Try: curl -s -H 'Authorization: Bearer {}' http://{listen}/core/v1/projects", key.expose());
}

fn tracing_init() {
    agentplane_api::logs::init_local_tracing();
}
