//! A Run's workspace tools: `read_file`, `write_file`, `list_files`, `delete_file` and
//! `run_command`, each a command to the workspace's node (a command runs as an observed process
//! of the sandbox, killed when the Run stops).

use std::sync::Arc;
use std::time::Duration;

use agentplane_domain::platform::path::WorkspacePath;
use agentplane_domain::sandbox::command::{Command, CommandOutcome, Stream};
use agentplane_domain::sandbox::{ProcessConfig, ProcessId, ProcessState, Sandbox};
use base64::Engine as _;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{MAX_FILE_BYTES, workspace};
use crate::dispatch;
use crate::model::ToolDefinition;
use crate::ports::PortError;
use crate::ports::platform::{OutputPage, WorkspaceSandboxes};
use crate::tools::{Tool, ToolOutput};

/// The longest `run_command` waits for its command.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
/// The most text of one stream (and of a file read) the model is given.
const MAX_TOOL_TEXT: usize = 16 * 1024;

pub(super) struct ToolContext<S> {
    pub(super) store: S,
    pub(super) sandbox: Sandbox,
    pub(super) stop: watch::Receiver<bool>,
}

#[derive(Clone, Copy)]
pub(super) enum Kind {
    Read,
    Write,
    List,
    Delete,
    Command,
}

pub(super) struct WorkspaceTool<S> {
    pub(super) kind: Kind,
    pub(super) context: Arc<ToolContext<S>>,
}

fn path_schema() -> Value {
    json!({"type": "string", "description": "A path under /workspace (absolute, or relative to it)."})
}

impl<S: WorkspaceSandboxes> Tool for WorkspaceTool<S> {
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
            if matches!(self.kind, Kind::Write | Kind::Delete) && *c.stop.borrow() {
                // A stop (or a rollback) was asked for: the workspace changes no more, so what a
                // rollback restores is not written over after it is confirmed.
                return Err("the Run is stopping: the workspace is not changed any more".into());
            }
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
                    if content.len() > MAX_FILE_BYTES {
                        return Err(format!("`content` exceeds {} bytes", MAX_FILE_BYTES));
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

async fn node<S: WorkspaceSandboxes>(
    c: &ToolContext<S>,
    command: Command,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    workspace::run(&c.store, &c.sandbox, command).await.map_err(|e| e.to_string())
}

/// Starts `command` in the sandbox; its pid there.
async fn start_process<S: WorkspaceSandboxes>(
    c: &ToolContext<S>,
    config: ProcessConfig,
) -> Result<(ProcessId, u32), String> {
    let number = c
        .store
        .next_process_number(&c.sandbox.id, crate::now())
        .await
        .map_err(|e| format!("the sandbox cannot start processes: {e}"))?;
    let command = Command::StartProcess {
        sandbox_id: c.sandbox.id.clone(),
        number,
        config,
        tag: Some("run_command".into()),
    };
    match dispatch::run(&c.store, &c.sandbox.node_id, command).await.map_err(|e| e.to_string())? {
        CommandOutcome::Done { pid, .. } => Ok((ProcessId::Observed(number), pid.unwrap_or(0))),
        CommandOutcome::Failed { message } => Err(format!("the command did not start: {message}")),
    }
}

/// `run_command`: a shell command line in `/workspace`, waited for up to [`COMMAND_TIMEOUT`];
/// a stop of the Run kills it and every process it started.
async fn run_command<S: WorkspaceSandboxes>(c: &ToolContext<S>, line: &str) -> ToolOutput {
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
        match c.store.process_record(&c.sandbox.id, process).await {
            Ok(record) if record.state != ProcessState::Running => break Some(record),
            Ok(_) | Err(PortError::NotFound) => {}
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

async fn read_output<S: WorkspaceSandboxes>(
    c: &ToolContext<S>,
    process: ProcessId,
) -> Result<OutputPage, String> {
    c.store
        .process_output(&c.sandbox.id, process, None, 1024, crate::now())
        .await
        .map_err(|e| format!("reading the command's output: {e}"))
}

/// Kills `pid` inside the sandbox with its descendants (stopped first, so none forks away)
/// and its process group.
async fn kill<S: WorkspaceSandboxes>(c: &ToolContext<S>, pid: u32) {
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
