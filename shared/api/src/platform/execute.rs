//! The `run-execution` job's side of a platform Run (a `{kind: "platform_run"}` message on the
//! `runs` queue): the Run's session runs one turn with the Run's `model` and `input`, whose
//! tools act on the environment's workspace sandbox (`read_file`, `write_file`, `list_files`,
//! `delete_file`, `run_command`).
//!
//! Every status move is a conditional write on the Run's `version`:
//! - `queued → running` claims it (a duplicate message finds it running and does nothing);
//! - a sandbox that cannot be reached leaves it `running` with the `platform_runtime_unavailable`
//!   diagnostic and the message is sent again later; the next delivery claims it from there and
//!   clears the diagnostic, or ends it `stopped` when a stop came meanwhile;
//! - the end (`completed | failed | stopped`) is written once, with its `run.*` webhook event in
//!   the same transaction. A stop that came after the turn answered leaves it `completed`.
//!
//! A stop is noticed by a watcher that reads the Run while the turn goes on: it records a cancel
//! for the Run's turn (which ends it at its next step, before another model call) and kills a
//! command the Run is running.

use std::sync::Arc;
use std::time::Duration;

use agentplane_domain::agent::{Channel, VersionedConfig};
use agentplane_domain::ids::AgentId;
use agentplane_domain::platform::manifest::Manifest;
use agentplane_domain::platform::path::WorkspacePath;
use agentplane_domain::platform::run::{
    self as run_rules, ExecuteRun, FILE_INVALID, RUNTIME_UNAVAILABLE, Run, RunError, RunStatus,
};
use agentplane_domain::sandbox::command::{Command, CommandOutcome, Stream};
use agentplane_domain::sandbox::{ProcessConfig, ProcessId, ProcessState, Sandbox};
use agentplane_engine::ports::TurnStore;
use agentplane_engine::tools::{Tool, ToolOutput};
use agentplane_engine::{TurnContext, TurnError, TurnRequest, model::ToolDefinition};
use agentplane_store::{OutboxEvent, RunsMessage, StoreError};
use base64::Engine as _;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use super::checkpoint;
use super::error::PlatformError;
use super::workspace;
use crate::sandbox::dispatch;
use crate::{App, edge};

/// How the message was handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executed {
    /// Executed to this status.
    Ran(RunStatus),
    /// Not this delivery's to run (started, stopped, reverted or gone).
    Stale,
    /// Its session runs another turn, or a rollback holds the environment: queued again.
    Waiting,
    /// The sandbox cannot be reached: `running` with the diagnostic, sent again.
    Unavailable,
}

/// The tools a Run's agent has.
pub const TOOLS: [&str; 5] = ["read_file", "write_file", "list_files", "delete_file", "run_command"];
/// What the agent is told about its workspace.
const INSTRUCTIONS: &str = "You work on the files of a workspace mounted at /workspace. Use the tools to read, \
write, list and delete its files and to run shell commands in it. Answer with a short summary when the task is done.";
/// Model calls one Run may make.
const MAX_STEPS: u32 = 50;
/// How often the watcher reads the Run for a stop.
const STOP_POLL: Duration = Duration::from_millis(200);
/// The longest `run_command` waits for its command.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
/// The most text of one stream (and of a file read) the model is given.
const MAX_TOOL_TEXT: usize = 16 * 1024;
/// How long a Run whose sandbox cannot be reached (or whose session is busy) waits.
const RETRY_AFTER_S: i32 = 2;

/// Executes the Run the message names; see the module's notes.
pub async fn execute(app: &App, message: &ExecuteRun) -> Result<Executed, StoreError> {
    let run = match app.store.runs().get(&message.project_id, &message.run_id).await {
        Ok(run) => run,
        Err(StoreError::NotFound) => return Ok(Executed::Stale),
        Err(err) => return Err(err),
    };
    if super::rollback::in_progress(app, &run.project_id, &run.environment_id).await? {
        if run.status == RunStatus::Queued {
            resend(app, message).await?;
            return Ok(Executed::Waiting);
        }
        return Ok(Executed::Stale);
    }
    let Some(run) = claim(app, run).await? else { return Ok(Executed::Stale) };
    // A stop that came while the Run waited for its sandbox ends it here: nothing ran since
    // the last delivery, so there is nothing to checkpoint.
    if run.stop_requested {
        return finish(app, run, End::stopped(), Instant::now(), None).await;
    }
    // A rollback accepted between the check and the claim: wait for it, queued.
    if super::rollback::in_progress(app, &run.project_id, &run.environment_id).await? {
        requeue(app, &run, StoreError::Conflict).await;
        resend(app, message).await?;
        return Ok(Executed::Waiting);
    }
    let started = Instant::now();
    let environment = match app.store.environments().get(&run.project_id, &run.environment_id).await {
        Ok(environment) => environment,
        Err(StoreError::NotFound) => {
            let error =
                RunError { code: "environment_not_found".into(), message: "the environment is gone".into() };
            return finish(app, run, End::failed(error), started, None).await;
        }
        Err(err) => return Err(requeue(app, &run, err).await),
    };
    let sandbox = match workspace::sandbox(app, &environment).await {
        Ok(sandbox) => sandbox,
        Err(PlatformError::RuntimeUnavailable(detail)) => {
            unavailable(app, &run, &detail).await?;
            resend(app, message).await?;
            return Ok(Executed::Unavailable);
        }
        Err(PlatformError::Storage(err)) => return Err(requeue(app, &run, err).await),
        Err(other) => {
            let error = RunError { code: "run_failed".into(), message: other.to_string() };
            return finish(app, run, End::failed(error), started, None).await;
        }
    };
    let run = clear_unavailable(app, run).await?;
    // The workspace as the Run starts: its files are checked against it, and its checkpoint
    // is what the Run's diff starts from.
    let known = last_recorded(app, &environment, &run).await;
    let before = match checkpoint::take(app, &sandbox, known.as_ref()).await {
        Ok(taken) => taken,
        Err(PlatformError::RuntimeUnavailable(detail)) => {
            unavailable(app, &run, &detail).await?;
            resend(app, message).await?;
            return Ok(Executed::Unavailable);
        }
        Err(PlatformError::Storage(err)) => return Err(requeue(app, &run, err).await),
        Err(other) => {
            tracing::warn!(error = %other, run = %run.id, "the checkpoint before a Run failed");
            let error =
                RunError { code: "checkpoint_failed".into(), message: checkpoint::failure_message(&other) };
            return finish(app, run, End::failed(error), started, None).await;
        }
    };
    let Some(run) = checkpoint::record_start(app, run, &before).await? else { return Ok(Executed::Stale) };
    if let Some(error) = invalid_files(&run, &before.manifest) {
        return finish(app, run, End::failed(error), started, Some((&sandbox, &before.manifest))).await;
    }
    let (session, transcript) =
        match app.store.turns().session_with_transcript(&run.project_id, &run.session_id).await {
            Ok(found) => found,
            Err(StoreError::NotFound) => {
                let error =
                    RunError { code: "session_not_found".into(), message: "the session is gone".into() };
                return finish(app, run, End::failed(error), started, Some((&sandbox, &before.manifest)))
                    .await;
            }
            Err(err) => return Err(requeue(app, &run, err).await),
        };
    let hooks =
        app.store.has_webhooks(&run.project_id).await.map_err(|e| StoreError::unavailable(e.to_string()))?;
    // The session's transcript before the Run, for a rollback to restore.
    let saved = super::rollback::TranscriptBefore { body: transcript.as_ref().map(|t| t.body.clone()) };
    let saved = serde_json::to_vec(&saved).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    if let Err(err) = app.store.workspaces()?.put(&super::rollback::transcript_key(&run), saved).await {
        return Err(requeue(app, &run, err).await);
    }

    let (stopping, stop_seen) = watch::channel(false);
    let watcher = tokio::spawn(watch_stop(app.clone(), run.clone(), stopping));
    let _watcher = AbortOnDrop(watcher);
    let mut engine = app.engine.clone();
    let mut registry = (*engine.tools).clone();
    let context = Arc::new(ToolContext { app: app.clone(), sandbox: sandbox.clone(), stop: stop_seen });
    for kind in [Kind::Read, Kind::Write, Kind::List, Kind::Delete, Kind::Command] {
        registry.register(Arc::new(WorkspaceTool { kind, context: context.clone() }));
    }
    engine.tools = Arc::new(registry);
    let request = TurnRequest {
        project_id: run.project_id,
        session_id: run.session_id,
        agent_id: platform_agent(),
        channel: Channel::Draft,
        version: None,
        config: VersionedConfig {
            model: run.model.clone(),
            instructions: INSTRUCTIONS.into(),
            tools: TOOLS.iter().map(|t| (*t).to_owned()).collect(),
            max_steps: MAX_STEPS,
            attachments: Default::default(),
            human_in_the_loop: Default::default(),
            experience: Default::default(),
        },
        input: run.input.clone(),
        deadline: Instant::now() + app.background.invocation_budget,
        context: Some(TurnContext {
            last_event_seq: session.last_event_seq,
            transcript,
            spent_usd: session.cost_usd,
            webhooks: hooks,
            superseded: session.superseded_turns.clone(),
        }),
        budget: None,
        turn_id: Some(run.turn_id()),
        handover_at: None,
        tenant: None,
        images: Vec::new(),
        supersede: None,
    };
    let result = Box::pin(engine.run_turn(request)).await;
    let end = match result {
        Ok(outcome) => {
            let (status, error) = run_rules::ending(outcome.stop_reason, outcome.error);
            End { status, error, output: outcome.output_text }
        }
        Err(TurnError::Busy | TurnError::ActionsPending(_) | TurnError::BudgetPaused { .. }) => {
            // Another Run of the session holds it: this one waits its turn, queued.
            requeue(app, &run, StoreError::Conflict).await;
            resend(app, message).await?;
            return Ok(Executed::Waiting);
        }
        Err(TurnError::SessionNotFound) => {
            End::failed(RunError { code: "session_not_found".into(), message: "the session is gone".into() })
        }
        Err(TurnError::ModelNotPriced { model }) => End::failed(RunError {
            code: "model_not_priced".into(),
            message: format!("the model `{model}` has no price"),
        }),
        Err(TurnError::Storage(err)) => End::failed(RunError {
            code: "storage_unavailable".into(),
            message: format!("storage failed during the Run: {err}"),
        }),
    };
    finish(app, run, end, started, Some((&sandbox, &before.manifest))).await
}

/// The agent id a Run's turns record (Runs have no agent of the client API).
/// The last manifest recorded for the environment before this Run: the Run just before it in
/// the environment's order (its end checkpoint, else its start), else the environment's
/// initial checkpoint. Its blobs are referenced, so the start checkpoint looks up (and the
/// retention sweep's rules refresh) only what changed since: 2 reads and 1 GET instead of a
/// look-up per file. `None` on any failure: every blob is looked up then.
async fn last_recorded(
    app: &App,
    environment: &agentplane_domain::platform::Environment,
    run: &Run,
) -> Option<Manifest> {
    let previous = run.environment_sequence.checked_sub(1).filter(|n| *n > 0);
    let mut id = None;
    if let Some(n) = previous
        && let Ok(ids) = app.store.runs().sequence_range(&run.environment_id, n, n).await
        && let Some(prev) = ids.first()
        && let Ok(prev) = app.store.runs().get(&run.project_id, prev).await
    {
        id = match (prev.checkpoint.status, prev.checkpoint.snapshot_id) {
            (agentplane_domain::platform::run::CheckpointStatus::Ready, Some(snapshot)) => Some(snapshot),
            _ => prev.start_manifest,
        };
    }
    let id = id.or_else(|| environment.initial_checkpoint.clone())?;
    checkpoint::load(app, &id).await.ok()
}

fn platform_agent() -> AgentId {
    AgentId::from_random([0; 16])
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn resend(app: &App, message: &ExecuteRun) -> Result<(), StoreError> {
    app.store.runs_queue()?.send_delayed(&RunsMessage::PlatformRun(message.clone()), RETRY_AFTER_S).await
}

/// `queued → running`, or `running` with the unavailability diagnostic (a retry): the Run this
/// delivery executes; `None` when it is not this delivery's.
async fn claim(app: &App, mut run: Run) -> Result<Option<Run>, StoreError> {
    for _ in 0..8 {
        let retry = run.status == RunStatus::Running
            && run.error.as_ref().is_some_and(|e| e.code == RUNTIME_UNAVAILABLE);
        if run.status != RunStatus::Queued && !retry {
            return Ok(None);
        }
        let expected = run.version;
        run.status = RunStatus::Running;
        run.started_at.get_or_insert(edge::now());
        run.version = expected + 1;
        match app.store.runs().replace(&run, expected).await {
            Ok(()) => return Ok(Some(run)),
            Err(StoreError::Conflict) => run = app.store.runs().get(&run.project_id, &run.id).await?,
            Err(err) => return Err(err),
        }
    }
    Ok(None)
}

/// Writes `change` to the Run as it is stored now (read again on a conflict), while it is
/// still `running`; the Run as written, or `None` when it is no longer running.
pub(super) async fn update_running(
    app: &App,
    run: &Run,
    change: impl Fn(&mut Run),
    events: impl Fn(&Run) -> Vec<OutboxEvent>,
) -> Result<Option<(Run, Vec<OutboxEvent>)>, StoreError> {
    let mut current = run.clone();
    for _ in 0..8 {
        if current.status != RunStatus::Running {
            return Ok(None);
        }
        let expected = current.version;
        let mut next = current.clone();
        change(&mut next);
        next.version = expected + 1;
        let emitted = events(&next);
        match app.store.runs().replace_emitting(&next, expected, &emitted).await {
            Ok(()) => return Ok(Some((next, emitted))),
            Err(StoreError::Conflict) => current = app.store.runs().get(&run.project_id, &run.id).await?,
            Err(err) => return Err(err),
        }
    }
    Err(StoreError::Conflict)
}

/// Records that the sandbox cannot be reached (the Run stays `running`).
async fn unavailable(app: &App, run: &Run, detail: &str) -> Result<(), StoreError> {
    let message = format!("the environment's sandbox cannot be reached: {detail}");
    update_running(
        app,
        run,
        |r| r.error = Some(RunError { code: RUNTIME_UNAVAILABLE.into(), message: message.clone() }),
        |_| Vec::new(),
    )
    .await?;
    Ok(())
}

/// Clears the unavailability diagnostic once the sandbox is reached.
async fn clear_unavailable(app: &App, run: Run) -> Result<Run, StoreError> {
    if run.error.as_ref().is_none_or(|e| e.code != RUNTIME_UNAVAILABLE) {
        return Ok(run);
    }
    match update_running(app, &run, |r| r.error = None, |_| Vec::new()).await? {
        Some((run, _)) => Ok(run),
        None => Ok(run),
    }
}

/// Puts a Run that could not start back to `queued` (its message comes again); returns `err`.
async fn requeue(app: &App, run: &Run, err: StoreError) -> StoreError {
    let mut current = run.clone();
    for _ in 0..4 {
        if current.status != RunStatus::Running {
            break;
        }
        let expected = current.version;
        let mut next = current.clone();
        next.status = RunStatus::Queued;
        next.started_at = None;
        next.version = expected + 1;
        match app.store.runs().replace(&next, expected).await {
            Ok(()) => break,
            Err(StoreError::Conflict) => match app.store.runs().get(&run.project_id, &run.id).await {
                Ok(found) => current = found,
                Err(_) => break,
            },
            Err(e) => {
                tracing::warn!(error = %e, run = %run.id, "could not put a Run back in the queue");
                break;
            }
        }
    }
    err
}

/// The files the Run names that are not regular files of the workspace (or not of the digest
/// given): the Run fails before it executes.
fn invalid_files(run: &Run, manifest: &Manifest) -> Option<RunError> {
    let bad: Vec<String> = run
        .files
        .iter()
        .filter(|f| match manifest.files.get(&f.path) {
            None => true,
            Some(entry) => f.sha256.as_ref().is_some_and(|sha| *sha != entry.sha256),
        })
        .map(|f| f.path.clone())
        .collect();
    (!bad.is_empty()).then(|| RunError {
        code: FILE_INVALID.into(),
        message: format!("not a regular workspace file (or not of the sha256 given): {}", bad.join(", ")),
    })
}

/// How the execution ended.
struct End {
    status: RunStatus,
    error: Option<RunError>,
    output: Option<String>,
}

impl End {
    fn failed(error: RunError) -> Self {
        Self { status: RunStatus::Failed, error: Some(error), output: None }
    }

    fn stopped() -> Self {
        Self { status: RunStatus::Stopped, error: None, output: None }
    }
}

/// The `run.*` event of a Run that reached its status.
pub fn run_event(run: &Run) -> Option<OutboxEvent> {
    let kind = run.status.event_type()?;
    let data = agentplane_domain::webhook::events::platform_run(run);
    let id = agentplane_domain::webhook::MessageId::from_random(edge::random().ok()?);
    Some(OutboxEvent::new(id, run.project_id, kind, &data, edge::now()))
}

/// Checkpoints the workspace (when the sandbox was reached) and writes the Run's end with its
/// event, once.
async fn finish(
    app: &App,
    run: Run,
    end: End,
    started: Instant,
    workspace: Option<(&Sandbox, &Manifest)>,
) -> Result<Executed, StoreError> {
    let after = match workspace {
        Some((sandbox, before)) => Some(checkpoint::take(app, sandbox, Some(before)).await),
        None => None,
    };
    if let Some(Err(err)) = &after {
        tracing::warn!(error = %err, run = %run.id, "the checkpoint after a Run failed");
    }
    let before = workspace.map(|(_, manifest)| manifest);
    let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let now = edge::now();
    let written = update_running(
        app,
        &run,
        |r| {
            r.status = end.status;
            r.error = end.error.clone();
            r.output = end.output.clone();
            r.finished_at = Some(now);
            r.sandbox_runtime_ms = r.sandbox_runtime_ms.saturating_add(elapsed);
            checkpoint::record_end(r, before, after.as_ref());
        },
        |r| run_event(r).into_iter().collect(),
    )
    .await?;
    match written {
        Some((run, events)) => {
            if let Err(err) = app.store.webhooks().dispatch(&events).await {
                tracing::warn!(error = %err, run = %run.id, "could not send a Run's webhook event");
            }
            Ok(Executed::Ran(run.status))
        }
        None => Ok(Executed::Stale),
    }
}

/// Reads the Run until a stop is requested; then tells the tools (a running command is killed)
/// and records a cancel for the Run's turn, so it ends at its next step.
async fn watch_stop(app: App, run: Run, stopping: watch::Sender<bool>) {
    let turn_id = run.turn_id();
    let mut seen = false;
    loop {
        tokio::time::sleep(STOP_POLL).await;
        if !seen {
            match app.store.runs().get(&run.project_id, &run.id).await {
                Ok(found) if found.stop_requested => {
                    seen = true;
                    let _ = stopping.send(true);
                }
                Ok(_) => continue,
                Err(err) => {
                    tracing::warn!(error = %err, run = %run.id, "reading a Run for a stop failed");
                    continue;
                }
            }
        }
        // Cancel the Run's own turn only (once it holds the session).
        match app.store.sessions().turn_holder(&run.project_id, &run.session_id).await {
            Ok(holder) if holder.turn_id.as_deref() == Some(turn_id.as_str()) => {
                if holder.cancel_requested
                    || app
                        .store
                        .sessions()
                        .cancel_turn(&run.project_id, &run.session_id, edge::now())
                        .await
                        .is_ok()
                {
                    return;
                }
            }
            Ok(_) | Err(_) => {}
        }
    }
}

// ---- the workspace tools ----

struct ToolContext {
    app: App,
    sandbox: Sandbox,
    stop: watch::Receiver<bool>,
}

#[derive(Clone, Copy)]
enum Kind {
    Read,
    Write,
    List,
    Delete,
    Command,
}

struct WorkspaceTool {
    kind: Kind,
    context: Arc<ToolContext>,
}

fn path_schema() -> Value {
    json!({"type": "string", "description": "A path under /workspace (absolute, or relative to it)."})
}

impl Tool for WorkspaceTool {
    fn definition(&self) -> ToolDefinition {
        let (name, description, parameters) = match self.kind {
            Kind::Read => (
                "read_file",
                "Reads a workspace file (text).",
                json!({"type": "object", "properties": {"path": path_schema()}, "required": ["path"]}),
            ),
            Kind::Write => (
                "write_file",
                "Writes a workspace file (creating its directories), replacing what it held.",
                json!({"type": "object", "properties": {"path": path_schema(), "content": {"type": "string"}}, "required": ["path", "content"]}),
            ),
            Kind::List => (
                "list_files",
                "Lists the regular files under a workspace directory (the whole workspace by default).",
                json!({"type": "object", "properties": {"path": path_schema()}}),
            ),
            Kind::Delete => (
                "delete_file",
                "Deletes a workspace file.",
                json!({"type": "object", "properties": {"path": path_schema()}, "required": ["path"]}),
            ),
            Kind::Command => (
                "run_command",
                "Runs a shell command line in /workspace; answers its exit code and (bounded) output.",
                json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
            ),
        };
        ToolDefinition { name: name.into(), description: description.into(), parameters }
    }

    fn call(
        &self,
        arguments: Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ToolOutput> + Send + '_>> {
        Box::pin(async move {
            let c = &self.context;
            match self.kind {
                Kind::Read => {
                    let path = path_arg(&arguments, true)?;
                    let command =
                        Command::WorkspaceRead { sandbox_id: c.sandbox.id.clone(), path: path.relative() };
                    let details = node(c, command).await?;
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(details.get("content").map_or("", String::as_str))
                        .map_err(|e| format!("the node's answer: {e}"))?;
                    let (text, truncated) = bounded(&bytes);
                    Ok(
                        json!({"path": path.absolute(), "size": bytes.len(), "content": text, "truncated": truncated}),
                    )
                }
                Kind::Write => {
                    let path = path_arg(&arguments, true)?;
                    let content = arguments
                        .get("content")
                        .and_then(Value::as_str)
                        .ok_or("`content` must be a string")?;
                    if content.len() > super::files::MAX_FILE_BYTES {
                        return Err(format!("`content` exceeds {} bytes", super::files::MAX_FILE_BYTES));
                    }
                    let encoded = base64::engine::general_purpose::STANDARD.encode(content.as_bytes());
                    let command = Command::WorkspaceWrite {
                        sandbox_id: c.sandbox.id.clone(),
                        path: path.relative(),
                        content: encoded,
                    };
                    node(c, command).await?;
                    Ok(json!({"path": path.absolute(), "size": content.len()}))
                }
                Kind::List => {
                    let path = match arguments.get("path") {
                        None | Some(Value::Null) => {
                            WorkspacePath::parse_relative("").map_err(|e| e.to_string())?
                        }
                        Some(_) => path_arg(&arguments, false)?,
                    };
                    let command =
                        Command::WorkspaceList { sandbox_id: c.sandbox.id.clone(), path: path.relative() };
                    let details = node(c, command).await?;
                    let entries: Vec<Value> =
                        serde_json::from_str(details.get("entries").map_or("[]", String::as_str))
                            .map_err(|e| format!("the node's listing: {e}"))?;
                    let files: Vec<Value> = entries
                        .iter()
                        .map(|e| {
                            json!({"path": format!("/workspace/{}", e["path"].as_str().unwrap_or_default()), "size": e["size"]})
                        })
                        .collect();
                    Ok(
                        json!({"files": files, "hasMore": details.get("has_more").is_some_and(|m| m == "true")}),
                    )
                }
                Kind::Delete => {
                    let path = path_arg(&arguments, true)?;
                    let command =
                        Command::WorkspaceDelete { sandbox_id: c.sandbox.id.clone(), path: path.relative() };
                    node(c, command).await?;
                    Ok(json!({"deleted": path.absolute()}))
                }
                Kind::Command => {
                    let line = arguments
                        .get("command")
                        .and_then(Value::as_str)
                        .ok_or("`command` must be a string")?;
                    if line.trim().is_empty() || line.len() > 16 * 1024 {
                        return Err("`command` must be a non-blank command line of at most 16 KiB".into());
                    }
                    run_command(c, line).await
                }
            }
        })
    }
}

/// The `path` argument: absolute under `/workspace`, or relative to it.
fn path_arg(arguments: &Value, file: bool) -> Result<WorkspacePath, String> {
    let text = arguments.get("path").and_then(Value::as_str).ok_or("`path` must be a string")?;
    let parsed = if text.starts_with('/') {
        WorkspacePath::parse_any(text)
    } else {
        WorkspacePath::parse_relative(text.trim_start_matches("./"))
    }
    .map_err(|e| e.to_string())?;
    if file && parsed.is_root() {
        return Err("`path` must name a file under /workspace".into());
    }
    Ok(parsed)
}

/// Text for the model: UTF-8 (lossy) within [`MAX_TOOL_TEXT`], and whether it was cut.
fn bounded(bytes: &[u8]) -> (String, bool) {
    let cut = bytes.len() > MAX_TOOL_TEXT;
    (String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_TOOL_TEXT)]).into_owned(), cut)
}

async fn node(
    c: &ToolContext,
    command: Command,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    workspace::run(&c.app, &c.sandbox, command).await.map_err(|e| e.to_string())
}

/// Starts `command` in the sandbox; its pid there.
async fn start_process(c: &ToolContext, config: ProcessConfig) -> Result<(ProcessId, u32), String> {
    let number = c
        .app
        .store
        .sandboxes()
        .next_process_number(&c.sandbox.id, edge::now())
        .await
        .map_err(|e| format!("the sandbox cannot start processes: {e}"))?;
    let command = Command::StartProcess {
        sandbox_id: c.sandbox.id.clone(),
        number,
        config,
        tag: Some("run_command".into()),
    };
    match dispatch::run(&c.app, &c.sandbox.node_id, command).await.map_err(|e| e.to_string())? {
        CommandOutcome::Done { pid, .. } => Ok((ProcessId::Observed(number), pid.unwrap_or(0))),
        CommandOutcome::Failed { message } => Err(format!("the command did not start: {message}")),
    }
}

/// `run_command`: a shell command line in `/workspace`, waited for up to [`COMMAND_TIMEOUT`];
/// a stop of the Run kills it and every process it started.
async fn run_command(c: &ToolContext, line: &str) -> ToolOutput {
    if *c.stop.borrow() {
        return Err("the Run is stopping".into());
    }
    let config = ProcessConfig {
        cmd: "bash".into(),
        args: vec!["-c".into(), line.to_owned()],
        envs: Default::default(),
        cwd: Some("/workspace".into()),
    };
    let (process, pid) = start_process(c, config).await?;
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let mut stop = c.stop.clone();
    let ended = loop {
        match c.app.store.observations().process(&c.sandbox.id, process).await {
            Ok(record) if record.state != ProcessState::Running => break Some(record),
            Ok(_) | Err(StoreError::NotFound) => {}
            Err(err) => return Err(format!("reading the command's state: {err}")),
        }
        if *stop.borrow() || Instant::now() >= deadline {
            break None;
        }
        tokio::select! {
            _ = stop.changed() => {}
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    };
    let Some(record) = ended else {
        kill(c, pid).await;
        let why = if *c.stop.borrow() { "the Run was stopped" } else { "the command timed out" };
        return Err(format!("{why}: the command was killed"));
    };
    // The node reports output before the exit, but the two may be recorded a moment apart:
    // read until two reads agree.
    let mut page = read_output(c, process).await?;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let again = read_output(c, process).await?;
        if again.chunks.len() == page.chunks.len() {
            break;
        }
        page = again;
    }
    let (mut out, mut err) = (Vec::new(), Vec::new());
    for chunk in page.chunks {
        let bytes = base64::engine::general_purpose::STANDARD.decode(chunk.data).unwrap_or_default();
        match chunk.stream {
            Stream::Stdout => out.extend(bytes),
            Stream::Stderr => err.extend(bytes),
        }
    }
    let (stdout, cut_out) = bounded(&out);
    let (stderr, cut_err) = bounded(&err);
    Ok(json!({
        "exitCode": record.exit_code,
        "stdout": stdout,
        "stderr": stderr,
        "truncated": cut_out || cut_err || page.has_more,
    }))
}

async fn read_output(
    c: &ToolContext,
    process: ProcessId,
) -> Result<agentplane_store::dynamo::observations::OutputPage, String> {
    c.app
        .store
        .observations()
        .output(&c.sandbox.id, process, None, 1024, edge::now())
        .await
        .map_err(|e| format!("reading the command's output: {e}"))
}

/// Kills `pid` inside the sandbox with its descendants (stopped first, so none forks away)
/// and its process group.
async fn kill(c: &ToolContext, pid: u32) {
    let script = format!(
        "tree() {{ kill -STOP $1 2>/dev/null; for c in $(cat /proc/$1/task/*/children 2>/dev/null); do tree $c; done; kill -KILL $1 2>/dev/null; }}; \
         tree {pid}; kill -KILL -- -{pid} 2>/dev/null; true"
    );
    let config = ProcessConfig {
        cmd: "bash".into(),
        args: vec!["-c".into(), script],
        envs: Default::default(),
        cwd: None,
    };
    if let Err(err) = start_process(c, config).await {
        tracing::warn!(error = %err, sandbox = %c.sandbox.id, "could not kill a Run's command");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_paths_are_absolute_or_relative_to_the_workspace() {
        let p = |v: Value| path_arg(&json!({ "path": v }), true).map(|p| p.absolute());
        assert_eq!(p(json!("/workspace/a.txt")), Ok("/workspace/a.txt".into()));
        assert_eq!(p(json!("src/a.rs")), Ok("/workspace/src/a.rs".into()));
        assert_eq!(p(json!("./src/a.rs")), Ok("/workspace/src/a.rs".into()));
        assert!(p(json!("/etc/passwd")).is_err());
        assert!(p(json!("../x")).is_err());
        assert!(p(json!(".git/config")).is_err());
        assert!(p(json!("/workspace")).is_err());
        assert!(path_arg(&json!({}), true).is_err());
    }

    #[test]
    fn text_is_bounded() {
        assert_eq!(bounded(b"hi"), ("hi".into(), false));
        let (text, cut) = bounded(&vec![b'x'; MAX_TOOL_TEXT + 1]);
        assert!(cut);
        assert_eq!(text.len(), MAX_TOOL_TEXT);
    }
}
