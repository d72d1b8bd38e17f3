//! `process.Process`: processes started in the sandbox through the node's one start path,
//! streamed to the caller as they run and reported to Core as observed processes.

use std::time::Duration;

use agentplane_domain::sandbox::ProcessId;
use agentplane_domain::sandbox::command::NodeEvent;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::broadcast;

use super::connect::{self, Code, ConnectError};
use super::messages::{
    CloseStdinRequest, ConnectRequest, DataEvent, Empty, EndEvent, EventResponse, ListResponse,
    ProcessConfig, ProcessEvent, ProcessInfo, ProcessSelector, SendInputRequest, SendSignalRequest,
    StartRequest,
};
use super::{Admitted, Node, admit, paths};
use crate::local::host_process::HostProcess;

/// How often a quiet stream says it is alive.
const KEEPALIVE: Duration = Duration::from_secs(30);
/// Output events a slow reader may fall behind by before it misses some (the observation
/// Core keeps is not affected).
const TAP_CAPACITY: usize = 4096;

/// What a watched process produced, as its envd callers see it.
#[derive(Debug, Clone)]
pub enum Tapped {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// The witnessed exit (code, signal), or `None` when its status was lost.
    End(Option<(Option<i32>, Option<i32>)>),
}

/// A process started through envd, while it runs.
pub struct Running {
    pid: u32,
    tag: Option<String>,
    config: ProcessConfig,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    process: HostProcess,
    events: broadcast::Sender<Tapped>,
}

pub(super) async fn call(
    State(node): State<std::sync::Arc<Node>>,
    Path(method): Path<String>,
    headers: http::HeaderMap,
    body: Bytes,
) -> Response {
    let admitted = match admit(&node, &headers).await {
        Ok(a) => a,
        Err(refused) => return ConnectError::from(refused).into_response(),
    };
    let answer = match method.as_str() {
        "Start" => match connect::stream_request(&headers, &body) {
            Ok(request) => start(&node, &admitted, request).await,
            Err(err) => Err(err),
        },
        "Connect" => match connect::stream_request::<ConnectRequest>(&headers, &body) {
            Ok(request) => reattach(&admitted, &request.process).await,
            Err(err) => Err(err),
        },
        "List" => Ok(list(&admitted).await),
        "SendInput" => match connect::unary_request(&headers, &body) {
            Ok(request) => send_input(&admitted, request).await,
            Err(err) => Err(err),
        },
        "StreamInput" => stream_input(&admitted, &body).await,
        "SendSignal" => match connect::unary_request(&headers, &body) {
            Ok(request) => send_signal(&admitted, &request).await,
            Err(err) => Err(err),
        },
        "CloseStdin" => match connect::unary_request::<CloseStdinRequest>(&headers, &body) {
            Ok(request) => close_stdin(&admitted, &request.process).await,
            Err(err) => Err(err),
        },
        "Update" => Err(ConnectError::new(Code::Unimplemented, "pseudo-terminals are not served")),
        _ => Err(ConnectError::new(Code::Unimplemented, format!("process.Process/{method} is not served"))),
    };
    answer.unwrap_or_else(IntoResponse::into_response)
}

/// The configuration Core would accept for the same process (the same rules), with the E2B
/// user's home read as the workspace.
fn config_of(
    request: StartRequest,
) -> Result<(agentplane_domain::sandbox::ProcessConfig, Option<String>), ConnectError> {
    let cwd = match request.process.cwd.filter(|c| !c.is_empty()) {
        None => None,
        Some(cwd) => Some(paths::absolute(&paths::relative(&cwd)?)),
    };
    let args = Some(request.process.args);
    let envs = Some(request.process.envs);
    agentplane_domain::sandbox::request::start_process(request.process.cmd, args, envs, cwd, request.tag)
        .map(|s| (s.config, s.tag))
        .map_err(|e| ConnectError::new(Code::InvalidArgument, e.to_string()))
}

async fn start(
    node: &std::sync::Arc<Node>,
    admitted: &Admitted,
    request: StartRequest,
) -> Result<Response, ConnectError> {
    if request.pty.is_some() {
        return Err(ConnectError::new(Code::Unimplemented, "pseudo-terminals are not served"));
    }
    if admitted.paused {
        return Err(ConnectError::new(Code::Unavailable, "the sandbox is paused"));
    }
    let stdin = request.stdin.unwrap_or(true);
    let (config, tag) = config_of(request)?;
    let id = admitted.sandbox.id.clone();
    let number = node.client.reserve_process(&id).await.map_err(|err| {
        tracing::warn!(sandbox = %id, error = %err, "Core did not reserve a process number");
        ConnectError::new(Code::Unavailable, "the process could not be recorded, so it was not started")
    })?;
    let mut started = node
        .provider
        .start_with(&admitted.sandbox, &config, stdin)
        .await
        .map_err(|e| ConnectError::new(Code::Internal, e))?;
    let pid = started.pid;
    let process = ProcessId::Observed(number);
    let (events, receiver) = broadcast::channel(TAP_CAPACITY);
    let Some(handle) = started.inner.try_clone() else {
        return Err(ConnectError::new(Code::Internal, "no handle on the process could be kept"));
    };
    let running = std::sync::Arc::new(Running {
        pid,
        tag: tag.clone(),
        config: ProcessConfig {
            cmd: config.cmd.clone(),
            args: config.args.clone(),
            envs: config.envs.clone(),
            cwd: config.cwd.clone(),
        },
        stdin: tokio::sync::Mutex::new(started.child.stdin.take()),
        process: handle,
        events: events.clone(),
    });
    admitted.access.processes.lock().await.insert(pid, running);
    tracing::info!(sandbox = %id, %process, pid, "envd started a process");
    node.emit(NodeEvent::ProcessStarted {
        sandbox_id: id.clone(),
        process,
        pid,
        config,
        tag,
        at: super::super::now(),
    });
    let (n, access) = (node.clone(), admitted.access.clone());
    node.spawn(async move {
        super::super::commands::watch(n, id, process, started, Some(events)).await;
        access.processes.lock().await.remove(&pid);
    })
    .await;
    Ok(connect::stream_response(stream(pid, receiver)))
}

/// The frames of a process's stream: its start, its output as it comes, keepalives, its end.
fn stream(pid: u32, receiver: broadcast::Receiver<Tapped>) -> impl futures_util::Stream<Item = Bytes> {
    let start = connect::envelope(&EventResponse { event: ProcessEvent::Start { pid } });
    let rest = futures_util::stream::unfold(Some(receiver), move |receiver| async move {
        let mut receiver = receiver?;
        loop {
            let event = tokio::select! {
                got = receiver.recv() => got,
                () = tokio::time::sleep(KEEPALIVE) => {
                    let alive = connect::envelope(&EventResponse { event: ProcessEvent::Keepalive {} });
                    return Some((alive, Some(receiver)));
                }
            };
            let frame = match event {
                Ok(Tapped::Stdout(bytes)) => ProcessEvent::Data(DataEvent::Stdout(bytes)),
                Ok(Tapped::Stderr(bytes)) => ProcessEvent::Data(DataEvent::Stderr(bytes)),
                Ok(Tapped::End(exit)) => {
                    let mut last =
                        connect::envelope(&EventResponse { event: ProcessEvent::End(end_event(exit)) })
                            .to_vec();
                    last.extend_from_slice(&connect::end_of_stream(None));
                    return Some((Bytes::from(last), None));
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::debug!(pid, missed, "an envd stream fell behind its process's output");
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => {
                    let err = ConnectError::new(Code::Unavailable, "the process is no longer watched");
                    return Some((connect::end_of_stream(Some(&err)), None));
                }
            };
            return Some((connect::envelope(&EventResponse { event: frame }), Some(receiver)));
        }
    });
    futures_util::stream::iter([start]).chain(rest)
}

fn end_event(exit: Option<(Option<i32>, Option<i32>)>) -> EndEvent {
    match exit {
        Some((code, signal)) => {
            let exit_code = agentplane_domain::sandbox::process::exit_code_for(code, signal).unwrap_or(-1);
            let status = match signal {
                Some(9) => "signal: killed".to_owned(),
                Some(s) => format!("signal: {s}"),
                None => format!("exit status {exit_code}"),
            };
            EndEvent { exit_code, exited: signal.is_none(), status, error: None }
        }
        None => EndEvent {
            exit_code: -1,
            exited: false,
            status: "unknown".into(),
            error: Some("the process's exit status was lost".into()),
        },
    }
}

async fn find(
    admitted: &Admitted,
    selector: &ProcessSelector,
) -> Result<std::sync::Arc<Running>, ConnectError> {
    let processes = admitted.access.processes.lock().await;
    let found = match (selector.pid, &selector.tag) {
        (Some(pid), _) => processes.get(&pid).cloned(),
        (None, Some(tag)) => processes.values().find(|p| p.tag.as_ref() == Some(tag)).cloned(),
        (None, None) => {
            return Err(ConnectError::new(Code::InvalidArgument, "name the process by pid or tag"));
        }
    };
    found.ok_or_else(|| {
        ConnectError::new(Code::NotFound, "no running process started through envd has that pid or tag")
    })
}

async fn reattach(admitted: &Admitted, selector: &ProcessSelector) -> Result<Response, ConnectError> {
    let running = find(admitted, selector).await?;
    Ok(connect::stream_response(stream(running.pid, running.events.subscribe())))
}

async fn list(admitted: &Admitted) -> Response {
    let processes = admitted.access.processes.lock().await;
    let processes = processes
        .values()
        .map(|p| ProcessInfo { config: p.config.clone(), pid: p.pid, tag: p.tag.clone() })
        .collect();
    connect::unary_response(&ListResponse { processes })
}

async fn write_stdin(running: &Running, bytes: &[u8]) -> Result<(), ConnectError> {
    let mut stdin = running.stdin.lock().await;
    let pipe = stdin
        .as_mut()
        .ok_or_else(|| ConnectError::new(Code::FailedPrecondition, "the process's stdin is not open"))?;
    if pipe.write_all(bytes).await.is_err() || pipe.flush().await.is_err() {
        *stdin = None;
        return Err(ConnectError::new(Code::FailedPrecondition, "the process's stdin is closed"));
    }
    Ok(())
}

async fn send_input(admitted: &Admitted, request: SendInputRequest) -> Result<Response, ConnectError> {
    let running = find(admitted, &request.process).await?;
    match (request.input.stdin, request.input.pty) {
        (_, Some(_)) => Err(ConnectError::new(Code::Unimplemented, "pseudo-terminals are not served")),
        (Some(bytes), None) => {
            write_stdin(&running, &bytes).await.map(|()| connect::unary_response(&Empty {}))
        }
        (None, None) => Ok(connect::unary_response(&Empty {})),
    }
}

/// The client stream of input: a start naming the process, then data, in order. Served over
/// HTTP/1.1 the whole stream arrives before it is applied.
async fn stream_input(admitted: &Admitted, body: &Bytes) -> Result<Response, ConnectError> {
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Message {
        start: Option<ConnectRequest>,
        data: Option<Data>,
    }
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Data {
        input: super::messages::ProcessInput,
    }
    let mut running = None;
    for message in connect::envelopes(body) {
        let message: Message = serde_json::from_slice(message?).map_err(|e| {
            ConnectError::new(Code::InvalidArgument, format!("the input message is invalid: {e}"))
        })?;
        if let Some(start) = message.start {
            running = Some(find(admitted, &start.process).await?);
        }
        if let Some(bytes) = message.data.and_then(|d| d.input.stdin) {
            let target = running.as_ref().ok_or_else(|| {
                ConnectError::new(Code::InvalidArgument, "input came before the start naming its process")
            })?;
            write_stdin(target, &bytes).await?;
        }
    }
    let frames = [connect::envelope(&Empty {}), connect::end_of_stream(None)];
    Ok(connect::stream_response(futures_util::stream::iter(frames)))
}

async fn send_signal(admitted: &Admitted, request: &SendSignalRequest) -> Result<Response, ConnectError> {
    let signal = request.signal.as_ref().and_then(super::messages::SignalName::signal).ok_or_else(|| {
        ConnectError::new(Code::InvalidArgument, "the signal must be SIGNAL_SIGTERM or SIGNAL_SIGKILL")
    })?;
    let running = find(admitted, &request.process).await?;
    if !running.process.signal(signal) {
        return Err(ConnectError::new(Code::NotFound, "the process has already ended"));
    }
    Ok(connect::unary_response(&Empty {}))
}

async fn close_stdin(admitted: &Admitted, selector: &ProcessSelector) -> Result<Response, ConnectError> {
    let running = find(admitted, selector).await?;
    running.stdin.lock().await.take();
    Ok(connect::unary_response(&Empty {}))
}
