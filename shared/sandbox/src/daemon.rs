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

#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Core's base URL (the node API is under `/node/v1`).
    pub core_url: String,
    pub token: String,
    /// Where sandboxes' workspaces and the daemon's state live.
    pub state_dir: PathBuf,
    pub heartbeat_every: Duration,
    /// The caps of every walk over a sandbox's workspace (listing, checkpoint scan, restore).
    pub workspace_limits: workspace::Limits,
    /// Each sandbox's disk (`/workspace` and `/tmp` together), MiB; 0: none (unbounded on the
    /// host's filesystem).
    pub disk_size_mb: u64,
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
    let client = CoreClient::new(&config.core_url, &config.token)?;
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
    let reporter = tokio::spawn(report_loop(node.clone(), inbox));
    let _reporter = AbortOnDropHandle::new(reporter);
    heartbeat_once(&node, &config).await;
    adopt(&node).await;
    let heartbeats = AbortOnDropHandle::new(tokio::spawn(heartbeat_loop(node.clone(), config.clone())));
    let deadlines = AbortOnDropHandle::new(tokio::spawn(deadline_loop(node.clone())));
    let _keep = (heartbeats, deadlines);
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
        node.sandboxes
            .lock()
            .await
            .insert(h.sandbox_id.clone(), Hosted { sandbox: local.clone(), end_at: h.end_at, paused });
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

async fn execute(node: Arc<Node>, envelope: CommandEnvelope) {
    let late = now() > envelope.expires_at;
    let started = std::time::Instant::now();
    let queued_ms = now().unix_millis() - envelope.issued_at.unix_millis();
    let outcome = match envelope.command {
        // Late lifecycle commands still apply: they were recorded before they were sent.
        Command::Kill { sandbox_id } => kill(&node, &sandbox_id).await,
        Command::SetDeadline { sandbox_id, end_at } => {
            if let Some(h) = node.sandboxes.lock().await.get_mut(&sandbox_id) {
                h.end_at = end_at;
            }
            done(None)
        }
        _ if late => {
            CommandOutcome::Failed { message: "the command arrived after its caller gave up".into() }
        }
        Command::CreateSandbox { sandbox_id, end_at, env_vars } => {
            create(&node, sandbox_id, end_at, env_vars).await
        }
        Command::StartProcess { sandbox_id, number, config, tag } => {
            start(&node, sandbox_id, ProcessId::Observed(number), config, tag).await
        }
        Command::Pause { sandbox_id } => pause(&node, &sandbox_id).await,
        Command::Resume { sandbox_id, end_at } => resume(&node, &sandbox_id, end_at).await,
        Command::WorkspaceWrite { sandbox_id, path, content } => {
            workspace_op(&node, &sandbox_id, move |root, uid| {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(content)
                    .map_err(|e| workspace::Failure::Io(format!("content is not base64: {e}")))?;
                workspace::write(root, uid, &path, &bytes).map(|()| Default::default())
            })
            .await
        }
        Command::WorkspaceRead { sandbox_id, path } => {
            workspace_op(&node, &sandbox_id, move |root, _| {
                let bytes = workspace::read(root, &path)?;
                let content = base64::engine::general_purpose::STANDARD.encode(bytes);
                Ok(std::collections::BTreeMap::from([("content".to_owned(), content)]))
            })
            .await
        }
        Command::WorkspaceDelete { sandbox_id, path } => {
            workspace_op(&node, &sandbox_id, move |root, _| {
                workspace::delete(root, &path).map(|()| Default::default())
            })
            .await
        }
        Command::WorkspaceList { sandbox_id, path } => {
            let limits = node.limits;
            workspace_op(&node, &sandbox_id, move |root, _| {
                let (entries, more) = workspace::list(root, &path, workspace::MAX_LIST_ENTRIES, &limits)?;
                let entries =
                    serde_json::to_string(&entries).map_err(|e| workspace::Failure::Io(e.to_string()))?;
                Ok(std::collections::BTreeMap::from([
                    ("entries".to_owned(), entries),
                    ("has_more".to_owned(), more.to_string()),
                ]))
            })
            .await
        }
        Command::WorkspaceScan { sandbox_id, upload_url } => {
            transfer::scan(&hosted_workspace(&node, &sandbox_id).await, &upload_url, node.limits).await
        }
        Command::WorkspaceUpload { sandbox_id, plan_url } => {
            transfer::upload(&hosted_workspace(&node, &sandbox_id).await, &plan_url).await
        }
        Command::WorkspaceRestore { sandbox_id, plan_url } => {
            transfer::restore(&hosted_workspace(&node, &sandbox_id).await, &plan_url, node.limits).await
        }
    };
    let executed = started.elapsed();
    let answer = node.client.complete(&envelope.id, &outcome).await;
    tracing::debug!(
        queued_ms,
        executed_ms = executed.as_millis() as u64,
        answered_ms = started.elapsed().as_millis() as u64,
        "command done"
    );
    if let Err(err) = answer {
        tracing::warn!(error = %err, command = %envelope.id, "could not answer a command");
    }
}

/// Runs a workspace operation of a hosted sandbox on a blocking thread (it walks and hashes
/// files); its refusals travel as the message Core reads back.
async fn workspace_op(
    node: &Arc<Node>,
    id: &SandboxId,
    op: impl FnOnce(
        &std::path::Path,
        u32,
    ) -> Result<std::collections::BTreeMap<String, String>, workspace::Failure>
    + Send
    + 'static,
) -> CommandOutcome {
    let sandbox = match node.sandboxes.lock().await.get(id) {
        Some(h) => h.sandbox.clone(),
        None => return failed("this node does not host the sandbox"),
    };
    let (root, uid) = sandbox.workspace();
    match tokio::task::spawn_blocking(move || op(&root, uid)).await {
        Ok(Ok(details)) => CommandOutcome::Done { pid: None, details },
        Ok(Err(failure)) => failed(failure.message()),
        Err(err) => failed(format!("the workspace operation panicked: {err}")),
    }
}

/// The workspace directory and uid of a hosted sandbox (`None`: not hosted here).
async fn hosted_workspace(node: &Arc<Node>, id: &SandboxId) -> Option<(std::path::PathBuf, u32)> {
    node.sandboxes.lock().await.get(id).map(|h| h.sandbox.workspace())
}

/// Checkpoints and restores: the workspace's files to and from the workspaces bucket through
/// presigned URLs, so no file travels through Core.
mod transfer {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::PathBuf;
    use std::time::Duration;

    use agentplane_domain::platform::manifest::{RestorePlan, UploadPlan};
    use agentplane_domain::sandbox::command::CommandOutcome;
    use futures_util::{StreamExt, TryStreamExt};

    use super::{failed, workspace};

    type Hosted = Option<(PathBuf, u32)>;

    /// Files moved at once.
    const IN_FLIGHT: usize = 16;

    fn http() -> Result<reqwest::Client, String> {
        reqwest::Client::builder().timeout(Duration::from_secs(300)).build().map_err(|e| e.to_string())
    }

    async fn blocking<T: Send + 'static>(
        f: impl FnOnce() -> Result<T, workspace::Failure> + Send + 'static,
    ) -> Result<T, String> {
        match tokio::task::spawn_blocking(f).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(failure)) => Err(failure.message()),
            Err(err) => Err(format!("the workspace operation panicked: {err}")),
        }
    }

    fn done(details: BTreeMap<String, String>) -> CommandOutcome {
        CommandOutcome::Done { pid: None, details }
    }

    fn answer(result: Result<BTreeMap<String, String>, String>) -> CommandOutcome {
        match result {
            Ok(details) => done(details),
            Err(message) => failed(message),
        }
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        http: &reqwest::Client,
        url: &str,
    ) -> Result<T, String> {
        let response = http.get(url).send().await.map_err(|e| format!("fetching the plan: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("fetching the plan: {}", response.status()));
        }
        response.json().await.map_err(|e| format!("reading the plan: {e}"))
    }

    pub async fn scan(hosted: &Hosted, upload_url: &str, limits: workspace::Limits) -> CommandOutcome {
        let Some((root, _)) = hosted.clone() else { return failed("this node does not host the sandbox") };
        answer(
            async {
                let (entries, _) = blocking(move || workspace::list(&root, "", usize::MAX, &limits)).await?;
                let body = serde_json::to_vec(&entries).map_err(|e| e.to_string())?;
                let response = http()?
                    .put(upload_url)
                    .body(body)
                    .send()
                    .await
                    .map_err(|e| format!("uploading the scan: {e}"))?;
                if !response.status().is_success() {
                    return Err(format!("uploading the scan: {}", response.status()));
                }
                Ok(BTreeMap::from([("files".to_owned(), entries.len().to_string())]))
            }
            .await,
        )
    }

    pub async fn upload(hosted: &Hosted, plan_url: &str) -> CommandOutcome {
        let Some((root, _)) = hosted.clone() else { return failed("this node does not host the sandbox") };
        answer(
            async {
                let http = http()?;
                let plan: UploadPlan = get_json(&http, plan_url).await?;
                let count = plan.files.len();
                let bytes: u64 = futures_util::stream::iter(plan.files.into_iter().map(|file| {
                    let (root, http) = (root.clone(), http.clone());
                    async move {
                        let path = file.path.clone();
                        let bytes =
                            blocking(move || workspace::read_within(&root, &path, workspace::MAX_BLOB_BYTES))
                                .await?;
                        if workspace::sha256_hex(&bytes) != file.sha256 {
                            return Err(format!("workspace:changed:{}", file.path));
                        }
                        let size = bytes.len() as u64;
                        let response = http
                            .put(&file.url)
                            .header("content-type", "application/octet-stream")
                            .body(bytes)
                            .send()
                            .await
                            .map_err(|e| format!("uploading {}: {e}", file.path))?;
                        if !response.status().is_success() {
                            return Err(format!("uploading {}: {}", file.path, response.status()));
                        }
                        Ok(size)
                    }
                }))
                .buffer_unordered(IN_FLIGHT)
                .try_fold(0u64, |sum, n| async move { Ok(sum + n) })
                .await?;
                Ok(BTreeMap::from([
                    ("uploaded".to_owned(), count.to_string()),
                    ("bytes".to_owned(), bytes.to_string()),
                ]))
            }
            .await,
        )
    }

    pub async fn restore(hosted: &Hosted, plan_url: &str, limits: workspace::Limits) -> CommandOutcome {
        let Some((root, uid)) = hosted.clone() else { return failed("this node does not host the sandbox") };
        answer(
            async {
                let http = http()?;
                let plan: RestorePlan = get_json(&http, plan_url).await?;
                let listed = root.clone();
                // A tree past the caps cannot be listed: it is cleared, and every file fetched.
                let current = blocking(move || match workspace::list(&listed, "", usize::MAX, &limits) {
                    Ok((current, _)) => Ok(current),
                    Err(workspace::Failure::TooLarge(_)) => {
                        workspace::clear(&listed, &limits).map(|_| Vec::new())
                    }
                    Err(err) => Err(err),
                })
                .await?;
                let current: BTreeMap<String, (String, u32)> =
                    current.into_iter().map(|e| (e.path, (e.sha256, e.mode))).collect();
                let keep: BTreeSet<&str> = plan.fetch.iter().map(|f| f.path.as_str()).collect();
                let mut removed = 0usize;
                for path in current.keys().filter(|p| !keep.contains(p.as_str())) {
                    let (root, path) = (root.clone(), path.clone());
                    match blocking(move || workspace::delete(&root, &path)).await {
                        Ok(()) => removed += 1,
                        Err(message) if message == workspace::Failure::NotFound.message() => {}
                        Err(message) => return Err(message),
                    }
                }
                let mode_of = |f: &agentplane_domain::platform::manifest::PlannedFile| {
                    f.mode.unwrap_or(workspace::DEFAULT_MODE) & workspace::MODE_BITS
                };
                // Same content, other mode: only the mode is written back.
                for file in plan.fetch.iter().filter(|f| {
                    current.get(&f.path).is_some_and(|(sha, mode)| *sha == f.sha256 && *mode != mode_of(f))
                }) {
                    let (root, path, mode) = (root.clone(), file.path.clone(), mode_of(file));
                    blocking(move || workspace::set_mode(&root, &path, mode)).await?;
                }
                let wanted: Vec<_> = plan
                    .fetch
                    .into_iter()
                    .filter(|f| current.get(&f.path).is_none_or(|(sha, _)| *sha != f.sha256))
                    .collect();
                let fetched = wanted.len();
                futures_util::stream::iter(wanted.into_iter().map(|file| {
                    let (root, http) = (root.clone(), http.clone());
                    let mode = mode_of(&file);
                    async move {
                        let response = http
                            .get(&file.url)
                            .send()
                            .await
                            .map_err(|e| format!("fetching {}: {e}", file.path))?;
                        if !response.status().is_success() {
                            return Err(format!("fetching {}: {}", file.path, response.status()));
                        }
                        let bytes =
                            response.bytes().await.map_err(|e| format!("fetching {}: {e}", file.path))?;
                        if workspace::sha256_hex(&bytes) != file.sha256 {
                            return Err(format!("the blob of {} is not of its digest", file.path));
                        }
                        blocking(move || {
                            workspace::write_within(
                                &root,
                                uid,
                                &file.path,
                                &bytes,
                                workspace::MAX_BLOB_BYTES,
                                mode,
                            )
                        })
                        .await
                    }
                }))
                .buffer_unordered(IN_FLIGHT)
                .try_collect::<Vec<()>>()
                .await?;
                Ok(BTreeMap::from([
                    ("removed".to_owned(), removed.to_string()),
                    ("fetched".to_owned(), fetched.to_string()),
                ]))
            }
            .await,
        )
    }
}

fn done(pid: Option<u32>) -> CommandOutcome {
    CommandOutcome::Done { pid, details: Default::default() }
}

fn failed(message: impl Into<String>) -> CommandOutcome {
    CommandOutcome::Failed { message: message.into() }
}

async fn create(
    node: &Arc<Node>,
    id: SandboxId,
    end_at: Timestamp,
    env_vars: std::collections::BTreeMap<String, String>,
) -> CommandOutcome {
    if let Some(h) = node.sandboxes.lock().await.get(&id) {
        return CommandOutcome::Done { pid: None, details: node.provider.isolation(&h.sandbox) };
    }
    match node.provider.create(&id, env_vars).await {
        Ok(local) => {
            let details = node.provider.isolation(&local);
            tracing::info!(sandbox = %id, ?details, "sandbox created");
            let local = Arc::new(local);
            node.sandboxes.lock().await.insert(id, Hosted { sandbox: local.clone(), end_at, paused: false });
            node.spawn(watch_init(node.clone(), local)).await;
            CommandOutcome::Done { pid: None, details }
        }
        Err(err) => failed(err),
    }
}

async fn start(
    node: &Arc<Node>,
    id: SandboxId,
    process: ProcessId,
    config: agentplane_domain::sandbox::ProcessConfig,
    tag: Option<String>,
) -> CommandOutcome {
    let sandbox = match node.sandboxes.lock().await.get(&id) {
        Some(h) if h.paused => return failed("the sandbox is paused"),
        Some(h) => h.sandbox.clone(),
        None => return failed("this node does not host the sandbox"),
    };
    let started = match node.provider.start(&sandbox, &config).await {
        Ok(s) => s,
        Err(err) => return failed(err),
    };
    let pid = started.pid;
    node.emit(NodeEvent::ProcessStarted { sandbox_id: id.clone(), process, pid, config, tag, at: now() });
    let n = node.clone();
    node.spawn(watch(n, id, process, started)).await;
    done(Some(pid))
}

/// Forwards a process's output as it comes and its exit once witnessed.
async fn watch(node: Arc<Node>, sandbox: SandboxId, process: ProcessId, mut started: Started) {
    let child = &mut started.child;
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(tokio::spawn(forward(node.clone(), sandbox.clone(), process, Stream::Stdout, out)));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(tokio::spawn(forward(node.clone(), sandbox.clone(), process, Stream::Stderr, err)));
    }
    let guards: Vec<AbortOnDropHandle<()>> = readers.into_iter().map(AbortOnDropHandle::new).collect();
    let status = child.wait().await;
    tracing::debug!(%sandbox, %process, ?status, "process exited");
    // Output still in the pipes belongs before the exit; a background child that keeps the
    // pipe open does not hold the exit back for long.
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        for g in &guards {
            while !g.is_finished() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    })
    .await;
    drop(guards);
    let at = now();
    match status {
        Ok(status) => {
            let (exit_code, signal) = started.exit_of(status);
            node.emit(NodeEvent::ProcessExited { sandbox_id: sandbox, process, exit_code, signal, at });
        }
        Err(err) => tracing::warn!(error = %err, %process, "lost a process's exit status"),
    }
}

async fn forward(
    node: Arc<Node>,
    sandbox: SandboxId,
    process: ProcessId,
    stream: Stream,
    mut pipe: impl tokio::io::AsyncRead + Unpin,
) {
    let mut buf = vec![0u8; MAX_CHUNK_BYTES];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => node.emit(NodeEvent::Output {
                sandbox_id: sandbox.clone(),
                process,
                stream,
                at: now(),
                data: base64::engine::general_purpose::STANDARD.encode(&buf[..n]),
            }),
        }
    }
}

async fn pause(node: &Arc<Node>, id: &SandboxId) -> CommandOutcome {
    let sandbox = match node.sandboxes.lock().await.get(id) {
        Some(h) => h.sandbox.clone(),
        None => return failed("this node does not host the sandbox"),
    };
    match sandbox.cgroup.freeze().await {
        Ok(()) => {
            if let Some(h) = node.sandboxes.lock().await.get_mut(id) {
                h.paused = true;
            }
            done(None)
        }
        Err(err) => failed(err),
    }
}

async fn resume(node: &Arc<Node>, id: &SandboxId, end_at: Timestamp) -> CommandOutcome {
    let sandbox = match node.sandboxes.lock().await.get(id) {
        Some(h) => h.sandbox.clone(),
        None => return failed("this node does not host the sandbox"),
    };
    match sandbox.cgroup.thaw().await {
        Ok(()) => {
            if let Some(h) = node.sandboxes.lock().await.get_mut(id) {
                h.paused = false;
                h.end_at = end_at;
            }
            done(None)
        }
        Err(err) => failed(err),
    }
}

async fn kill(node: &Arc<Node>, id: &SandboxId) -> CommandOutcome {
    let hosted = node.sandboxes.lock().await.remove(id);
    match hosted {
        Some(h) => node.provider.destroy(&h.sandbox).await,
        None => {
            // Perhaps adopted state was lost; clean up whatever is on disk.
            match node.provider.adopt(id, Default::default()) {
                Some(local) => node.provider.destroy(&local).await,
                None => node.provider.remove_leftovers(id).await,
            }
        }
    }
    done(None)
}

/// Enforces deadlines. Before killing, it asks Core for the current deadline, so a timeout
/// extension that has not reached the node yet is never undercut.
async fn deadline_loop(node: Arc<Node>) {
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t = now();
        let due: Vec<SandboxId> = node
            .sandboxes
            .lock()
            .await
            .iter()
            .filter(|(_, h)| !h.paused && h.end_at <= t)
            .map(|(id, _)| id.clone())
            .collect();
        if due.is_empty() {
            continue;
        }
        let Ok(truth) = node.client.hosted().await else { continue };
        for id in due {
            match truth.iter().find(|h| h.sandbox_id == id) {
                Some(h) if h.state == "running" => {
                    if let Some(local) = node.sandboxes.lock().await.get_mut(&id) {
                        local.end_at = h.end_at;
                    }
                }
                Some(h) if h.state == "paused" => {
                    if let Some(local) = node.sandboxes.lock().await.get_mut(&id) {
                        local.paused = true;
                    }
                }
                Some(_) => {
                    tracing::info!(sandbox = %id, "deadline reached: killing the sandbox");
                    let removed = node.sandboxes.lock().await.remove(&id);
                    if let Some(h) = removed {
                        node.provider.destroy(&h.sandbox).await;
                    }
                    node.emit(NodeEvent::SandboxExpired { sandbox_id: id, at: now() });
                }
                None => {
                    // Core ended it already (killed): make sure nothing is left.
                    let removed = node.sandboxes.lock().await.remove(&id);
                    if let Some(h) = removed {
                        node.provider.destroy(&h.sandbox).await;
                    }
                }
            }
        }
    }
}

async fn heartbeat_once(node: &Arc<Node>, config: &NodeConfig) {
    let sample = host::sample(&config.state_dir).await;
    let sandboxes: Vec<SandboxUsage> = node
        .sandboxes
        .lock()
        .await
        .values()
        .map(|h| SandboxUsage {
            sandbox_id: h.sandbox.id.clone(),
            cpu_seconds: h.sandbox.cgroup.cpu_seconds(),
            memory_bytes: h.sandbox.cgroup.memory_bytes(),
            memory_limit_bytes: h.sandbox.cgroup.memory_limit_bytes(),
            cpu_limit_cores: h.sandbox.cgroup.cpu_limit_cores(),
        })
        .collect();
    let heartbeat = Heartbeat {
        connection_id: node.connection.clone(),
        observed_at: now(),
        cpu: sample.cpu,
        total_memory_bytes: sample.total_memory_bytes,
        available_memory_bytes: sample.available_memory_bytes,
        available_disk_bytes: sample.available_disk_bytes,
        effective_cpu_cores: sample.effective_cpu_cores,
        sandboxes,
    };
    if let Err(err) = node.client.heartbeat(&heartbeat).await {
        tracing::warn!(error = %err, "heartbeat failed");
    }
}

async fn heartbeat_loop(node: Arc<Node>, config: NodeConfig) {
    loop {
        tokio::time::sleep(config.heartbeat_every).await;
        heartbeat_once(&node, &config).await;
    }
}

/// Largest report body (Core accepts 1 MiB); output is base64, so this leaves room.
const REPORT_DATA_BYTES: usize = 640 * 1024;
/// Most output gathered into one round before trimming (bounds memory and latency).
const ROUND_DATA_BYTES: usize = 16 * 1024 * 1024;

/// Sends events in order, in batches; a failed batch is sent again as it was (Core applies each
/// event once per connection), so nothing is skipped or reordered. Each round takes what is
/// queued and drops up front the output Core would drop anyway (saying so), which keeps a
/// fast printer from outrunning the node.
async fn report_loop(node: Arc<Node>, mut inbox: mpsc::UnboundedReceiver<NodeEvent>) {
    let mut seq = 0u64;
    while let Some(first) = inbox.recv().await {
        let mut round = vec![first];
        let mut size = 0usize;
        while size < ROUND_DATA_BYTES {
            match inbox.try_recv() {
                Ok(event) => {
                    if let NodeEvent::Output { data, .. } = &event {
                        size += data.len();
                    }
                    round.push(event);
                }
                Err(_) => break,
            }
        }
        let mut pending = trim_batch(round).into_iter().peekable();
        while pending.peek().is_some() {
            let mut events = Vec::new();
            let mut bytes = 0usize;
            while let Some(event) = pending.next_if(|_| bytes < REPORT_DATA_BYTES && events.len() < 500) {
                if let NodeEvent::Output { data, .. } = &event {
                    bytes += data.len();
                }
                seq += 1;
                events.push(SequencedEvent { seq, event });
            }
            let report = Report { connection_id: node.connection.clone(), events };
            let mut backoff = Duration::from_millis(50);
            while let Err(err) = node.client.report(&report).await {
                tracing::warn!(error = %err, "report failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}
