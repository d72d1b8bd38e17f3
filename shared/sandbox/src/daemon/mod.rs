//! The node daemon: heartbeats, executes the commands Core queues for it, watches the processes
//! it starts, enforces deadlines, and reports what it observed. Each start is a new connection:
//! what a previous connection was watching is reported as a gap, never guessed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentplane_domain::Timestamp;
use agentplane_domain::sandbox::command::{
    Command, CommandEnvelope, CommandOutcome, NodeEvent, Report, SequencedEvent, Stream,
};
use agentplane_domain::sandbox::host::{Heartbeat, SandboxUsage};
use agentplane_domain::sandbox::retention::{MAX_CHUNK_BYTES, trim_batch};
use agentplane_domain::sandbox::{ProcessId, SandboxId};
use base64::Engine;
use tokio::io::AsyncReadExt;
use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinSet;
use tokio_util::task::AbortOnDropHandle;

use crate::client::CoreClient;
use crate::host;
use crate::local::{LocalProvider, LocalSandbox, Started, workspace};

mod commands;
mod deadlines;
pub mod envd;
mod report;
pub mod token;
mod transfer;

use commands::execute;
use deadlines::deadline_loop;
use report::{heartbeat_loop, heartbeat_once, report_loop};

#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Core's base URL (the node API is under `/node/v1`).
    pub core_url: String,
    /// The node token Core registered; empty: enroll (see [`token::resolve`]). A token the
    /// daemon rotated to since is kept in the state dir and used instead.
    pub token: String,
    /// How to enroll when no token is configured.
    pub enrollment: Option<token::Enrollment>,
    /// When the daemon rotates its token.
    pub rotation: token::TokenRotation,
    /// Where sandboxes' workspaces and the daemon's state live.
    pub state_dir: PathBuf,
    pub heartbeat_every: Duration,
    /// The caps of every walk over a sandbox's workspace (listing, checkpoint scan, restore).
    pub workspace_limits: workspace::Limits,
    /// Each sandbox's disk (`/workspace` and `/tmp` together), MiB; 0: none (unbounded on the
    /// host's filesystem).
    pub disk_size_mb: u64,
    /// Where envd listens for the E2B SDK ([`envd::listen_from_env`]); `None`: not served.
    pub envd: Option<envd::Listen>,
}

/// `AGENTPLANE_NODE_DISK_MB`: each sandbox's disk in MiB ([`DEFAULT_DISK_MB`] unset; 0: none).
///
/// [`DEFAULT_DISK_MB`]: crate::local::DEFAULT_DISK_MB
pub fn disk_size_mb_from_env() -> anyhow::Result<u64> {
    match std::env::var("AGENTPLANE_NODE_DISK_MB") {
        Err(_) => Ok(crate::local::DEFAULT_DISK_MB),
        Ok(text) => text.trim().parse().map_err(|_| {
            anyhow::anyhow!("AGENTPLANE_NODE_DISK_MB must be a whole number of MiB, got {text:?}")
        }),
    }
}

pub fn now() -> Timestamp {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    Timestamp::from_unix_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}

struct Hosted {
    sandbox: Arc<LocalSandbox>,
    end_at: Timestamp,
    paused: bool,
    /// Its envd access (token, processes started through envd); `None`: not served by envd.
    envd: Option<Arc<envd::Access>>,
}

struct Node {
    client: CoreClient,
    connection: String,
    provider: LocalProvider,
    sandboxes: Mutex<HashMap<SandboxId, Hosted>>,
    events: mpsc::UnboundedSender<NodeEvent>,
    limits: workspace::Limits,
    /// Every task the daemon started; they hold the node, so [`run`] aborts them when it is
    /// dropped (a std mutex: never held across an await, and usable in `Drop`).
    tasks: std::sync::Mutex<JoinSet<()>>,
}

impl Node {
    fn emit(&self, event: NodeEvent) {
        let _ = self.events.send(event);
    }

    async fn spawn(self: &Arc<Self>, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while tasks.try_join_next().is_some() {}
        tasks.spawn(task);
    }
}

/// Runs the daemon until the future is dropped (which also stops every task it started; the
/// sandboxes and their processes keep running, as they would if the process died).
pub async fn run(config: NodeConfig) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.state_dir)?;
    let (token, token_file) =
        token::resolve(&config.core_url, &config.token, config.enrollment.as_ref(), &config.state_dir)
            .await?;
    let client = CoreClient::new(&config.core_url, token)?;
    let rotation = AbortOnDropHandle::new(tokio::spawn(token::rotation_loop(
        client.clone(),
        token_file,
        config.rotation.clone(),
    )));
    let connection = uuid::Uuid::new_v4().simple().to_string();
    let (events, inbox) = mpsc::unbounded_channel();
    let node = Arc::new(Node {
        client,
        connection,
        provider: LocalProvider::new(&config.state_dir).with_disk_mb(config.disk_size_mb),
        sandboxes: Mutex::new(HashMap::new()),
        events,
        limits: config.workspace_limits,
        tasks: std::sync::Mutex::new(JoinSet::new()),
    });
    tracing::info!(connection = %node.connection, state_dir = %config.state_dir.display(), "node daemon starting");
    if let Err(err) = node.provider.prepare() {
        tracing::error!(error = %err, "the node's sandbox files could not be written");
    }
    if let Some(problem) = node.provider.host_problem() {
        tracing::error!(%problem, "this host cannot run sandboxes: every create will fail until it is fixed");
    }
    let _tasks = AbortTasks(node.clone());
    let _envd = match &config.envd {
        Some(listen) => {
            let listener = listen.bind().await?;
            Some(AbortOnDropHandle::new(tokio::spawn(envd::serve(node.clone(), listener))))
        }
        None => None,
    };
    let reporter = tokio::spawn(report_loop(node.clone(), inbox));
    let _reporter = AbortOnDropHandle::new(reporter);
    heartbeat_once(&node, &config).await;
    adopt(&node).await;
    let heartbeats = AbortOnDropHandle::new(tokio::spawn(heartbeat_loop(node.clone(), config.clone())));
    let deadlines = AbortOnDropHandle::new(tokio::spawn(deadline_loop(node.clone())));
    let _keep = (heartbeats, deadlines, rotation);
    command_loop(node).await;
    Ok(())
}

/// Aborts the node's tasks (process and init watchers) when the daemon stops: each holds the
/// node, so without this they would outlive it and act for a daemon that is gone.
struct AbortTasks(Arc<Node>);

impl Drop for AbortTasks {
    fn drop(&mut self) {
        self.0.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).abort_all();
    }
}

/// Takes over the sandboxes Core says this node hosts: each one's processes were watched by
/// an earlier connection (or nobody), so that is reported as a gap and whatever still runs is
/// reported as seen, not as observed from its start.
async fn adopt(node: &Arc<Node>) {
    let hosted = loop {
        match node.client.hosted().await {
            Ok(h) => break h,
            Err(err) => {
                tracing::warn!(error = %err, "cannot list hosted sandboxes yet");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    for h in hosted {
        let at = now();
        if !node.provider.has_local_state(&h.sandbox_id) {
            // Core placed it here but its create command has not run yet (the node restarted
            // in between): the command loop creates it next. Ending it now would record a
            // sandbox killed that the create then starts, unwatched by Core.
            tracing::info!(sandbox = %h.sandbox_id, "a hosted sandbox not created here yet: its create command comes next");
            continue;
        }
        node.emit(NodeEvent::ObservationResumed { sandbox_id: h.sandbox_id.clone(), at });
        let Some(local) = node.provider.adopt(&h.sandbox_id, h.env_vars.clone()) else {
            // Its init ended while no daemon watched (or its record names other processes
            // now): nothing of it runs. Whatever is left goes, and Core records it killed.
            tracing::warn!(sandbox = %h.sandbox_id, connection = %node.connection, state = %h.state, "a hosted sandbox's init is gone: it has ended");
            node.provider.remove_leftovers(&h.sandbox_id).await;
            node.emit(NodeEvent::InitExited { sandbox_id: h.sandbox_id.clone(), at });
            continue;
        };
        for (pid, argv) in node.provider.live_processes(&local) {
            let mut argv = argv.into_iter();
            let cmd = argv.next().unwrap_or_default();
            node.emit(NodeEvent::LiveSeen {
                sandbox_id: h.sandbox_id.clone(),
                pid,
                cmd,
                args: argv.collect(),
                at,
            });
        }
        let paused = h.state == "paused";
        let local = Arc::new(local);
        let envd = envd::kept_token(node, &h.sandbox_id);
        node.sandboxes
            .lock()
            .await
            .insert(h.sandbox_id.clone(), Hosted { sandbox: local.clone(), end_at: h.end_at, paused, envd });
        node.spawn(watch_init(node.clone(), local)).await;
    }
}

/// Waits for the sandbox's init to exit. If the node did not end it (a process inside killed
/// it, or something on the host did), every process of the sandbox ended with it: the node
/// stops hosting it, removes what is left, and tells Core, which records it killed.
async fn watch_init(node: Arc<Node>, sandbox: Arc<LocalSandbox>) {
    sandbox.init_exited().await;
    if sandbox.ended_by_node() {
        return;
    }
    let ours = {
        let mut hosted = node.sandboxes.lock().await;
        let ours = hosted.get(&sandbox.id).is_some_and(|h| Arc::ptr_eq(&h.sandbox, &sandbox));
        if ours {
            hosted.remove(&sandbox.id);
        }
        ours
    };
    if !ours {
        return;
    }
    tracing::warn!(sandbox = %sandbox.id, "the sandbox's init exited: every process of it has ended");
    node.provider.destroy(&sandbox).await;
    node.emit(NodeEvent::InitExited { sandbox_id: sandbox.id.clone(), at: now() });
}

async fn command_loop(node: Arc<Node>) {
    loop {
        match node.client.poll(&node.connection, 20).await {
            Ok(commands) => {
                for command in commands {
                    let n = node.clone();
                    node.spawn(async move { execute(n, command).await }).await;
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "polling Core for commands failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
