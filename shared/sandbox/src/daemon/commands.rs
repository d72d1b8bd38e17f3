//! The commands Core queues for the node, each carried out and answered: sandboxes created,
//! paused, resumed and killed, processes started and watched, workspace operations.

use super::*;

pub(super) async fn execute(node: Arc<Node>, envelope: CommandEnvelope) {
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
        Command::CreateSandbox { sandbox_id, end_at, env_vars, envd_access_token } => {
            create(&node, sandbox_id, end_at, env_vars, envd_access_token).await
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

fn done(pid: Option<u32>) -> CommandOutcome {
    CommandOutcome::Done { pid, details: Default::default() }
}

pub(super) fn failed(message: impl Into<String>) -> CommandOutcome {
    CommandOutcome::Failed { message: message.into() }
}

async fn create(
    node: &Arc<Node>,
    id: SandboxId,
    end_at: Timestamp,
    env_vars: std::collections::BTreeMap<String, String>,
    envd_access_token: Option<String>,
) -> CommandOutcome {
    if let Some(h) = node.sandboxes.lock().await.get_mut(&id) {
        // A create sent again (Core retried it) carries the sandbox's token too: a sandbox
        // created without one gains it, one that has a token keeps it.
        if h.envd.is_none()
            && let Some(token) = envd_access_token.filter(|t| !t.is_empty())
        {
            envd::keep_token(node, &id, &token);
            h.envd = Some(envd::Access::new(token));
        }
        return CommandOutcome::Done { pid: None, details: node.provider.isolation(&h.sandbox) };
    }
    match node.provider.create(&id, env_vars).await {
        Ok(local) => {
            let details = node.provider.isolation(&local);
            tracing::info!(sandbox = %id, ?details, envd = envd_access_token.is_some(), "sandbox created");
            let envd = envd_access_token.filter(|t| !t.is_empty()).map(|token| {
                envd::keep_token(node, &id, &token);
                envd::Access::new(token)
            });
            let local = Arc::new(local);
            let hosted = Hosted { sandbox: local.clone(), end_at, paused: false, envd };
            node.sandboxes.lock().await.insert(id, hosted);
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
    node.spawn(watch(n, id, process, started, None)).await;
    done(Some(pid))
}

/// Forwards a process's output as it comes and its exit once witnessed, to Core and to the
/// `tap` (the envd callers of a process started through envd).
pub(super) async fn watch(
    node: Arc<Node>,
    sandbox: SandboxId,
    process: ProcessId,
    mut started: Started,
    tap: Option<Tap>,
) {
    let child = &mut started.child;
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        let reader = forward(node.clone(), sandbox.clone(), process, Stream::Stdout, out, tap.clone());
        readers.push(tokio::spawn(reader));
    }
    if let Some(err) = child.stderr.take() {
        let reader = forward(node.clone(), sandbox.clone(), process, Stream::Stderr, err, tap.clone());
        readers.push(tokio::spawn(reader));
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
    let exit = match status {
        Ok(status) => {
            let (exit_code, signal) = started.exit_of(status);
            node.emit(NodeEvent::ProcessExited { sandbox_id: sandbox, process, exit_code, signal, at });
            Some((exit_code, signal))
        }
        Err(err) => {
            tracing::warn!(error = %err, %process, "lost a process's exit status");
            None
        }
    };
    if let Some(tap) = tap {
        let _ = tap.send(envd::Tapped::End(exit));
    }
}

/// Where a process's output and exit go besides Core.
pub(super) type Tap = tokio::sync::broadcast::Sender<envd::Tapped>;

async fn forward(
    node: Arc<Node>,
    sandbox: SandboxId,
    process: ProcessId,
    stream: Stream,
    mut pipe: impl tokio::io::AsyncRead + Unpin,
    tap: Option<Tap>,
) {
    let mut buf = vec![0u8; MAX_CHUNK_BYTES];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if let Some(tap) = &tap {
                    let bytes = buf[..n].to_vec();
                    let _ = tap.send(match stream {
                        Stream::Stdout => envd::Tapped::Stdout(bytes),
                        Stream::Stderr => envd::Tapped::Stderr(bytes),
                    });
                }
                node.emit(NodeEvent::Output {
                    sandbox_id: sandbox.clone(),
                    process,
                    stream,
                    at: now(),
                    data: base64::engine::general_purpose::STANDARD.encode(&buf[..n]),
                });
            }
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
