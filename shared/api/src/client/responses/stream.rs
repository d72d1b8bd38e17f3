//! `stream: true`: a turn as the Responses streaming events, each a Server-Sent Event with its
//! `type` and the response's `sequence_number`: `response.created`, `response.in_progress`,
//! then per output item `response.output_item.added`, its content (`response.content_part.added`,
//! `response.output_text.delta`, `response.output_text.done`, `response.content_part.done` for a
//! message; `response.function_call_arguments.delta` and `.done` for a call the caller runs) and
//! `response.output_item.done`, and last `response.completed` (also for a turn that waits for
//! actions: its `function_call` items are what the caller runs), `response.incomplete` or
//! `response.failed`. An error before the turn ends is an `error` event, then
//! `response.failed`. The items are the events the turn commits, as each step commits them: the
//! session's event log stays the durable record, and the stream is a view of the same turn.

use agentplane_domain::metadata::Metadata;
use agentplane_domain::session::Session;
use agentplane_engine::Watched;
use agentplane_engine::admission::Admitted;
use axum::body::Bytes;
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::handlers::{Dialect, Work};
use super::output::{Items, OutputItem};
use super::wire::{Rendered, ResponseBody, ResponseStatusName};
use crate::App;

/// How often an open stream says it is still there while nothing else goes out.
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// What the Response shows besides the turn.
pub(crate) struct Shown {
    pub admitted: Admitted,
    pub metadata: Metadata,
    pub dialect: Dialect,
    pub created_at: i64,
}

/// Numbers the events of one response and sends them as frames.
struct Frames {
    tx: mpsc::Sender<Bytes>,
    sequence: u64,
}

impl Frames {
    async fn send(&mut self, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        // A caller that went away is no reason to stop: the turn runs on in its own task.
        let _ = self.tx.send(Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))).await;
    }

    /// One item, whole: added, its content, done.
    async fn item(&mut self, index: usize, item: &OutputItem) {
        let done = serde_json::to_value(item).unwrap_or_default();
        let mut added = done.clone();
        let id = done["id"].clone();
        match item {
            OutputItem::Message { content, .. } => {
                added["status"] = json!("in_progress");
                added["content"] = json!([]);
                self.send("response.output_item.added", json!({"output_index": index, "item": added})).await;
                for (part_index, part) in content.iter().enumerate() {
                    let at = json!({"item_id": id, "output_index": index, "content_index": part_index});
                    let empty = json!({"type": "output_text", "text": "", "annotations": []});
                    let full = serde_json::to_value(part).unwrap_or_default();
                    self.send("response.content_part.added", with(&at, "part", empty)).await;
                    let delta = with(&with(&at, "delta", json!(part.text)), "logprobs", json!([]));
                    self.send("response.output_text.delta", delta).await;
                    let text = with(&with(&at, "text", json!(part.text)), "logprobs", json!([]));
                    self.send("response.output_text.done", text).await;
                    self.send("response.content_part.done", with(&at, "part", full)).await;
                }
            }
            OutputItem::FunctionCall { arguments, .. } => {
                added["status"] = json!("in_progress");
                added["arguments"] = json!("");
                self.send("response.output_item.added", json!({"output_index": index, "item": added})).await;
                let at = json!({"item_id": id, "output_index": index});
                self.send("response.function_call_arguments.delta", with(&at, "delta", json!(arguments)))
                    .await;
                self.send("response.function_call_arguments.done", with(&at, "arguments", json!(arguments)))
                    .await;
            }
            OutputItem::McpCall { .. } | OutputItem::McpApprovalRequest { .. } => {
                if let OutputItem::McpCall { .. } = item {
                    added["status"] = json!("in_progress");
                    added["output"] = Value::Null;
                }
                self.send("response.output_item.added", json!({"output_index": index, "item": added})).await;
            }
        }
        self.send("response.output_item.done", json!({"output_index": index, "item": done})).await;
    }
}

fn with(base: &Value, key: &str, value: Value) -> Value {
    let mut out = base.clone();
    out[key] = value;
    out
}

/// The Response before anything ran: `in_progress`, no output.
fn opening(session: &Session, shown: &Shown) -> Value {
    json!({
        "id": format!("resp_{}", session.id),
        "object": "response",
        "created_at": shown.created_at,
        "status": "in_progress",
        "output": [],
        "session_id": session.id.to_string(),
        "agent": {"id": shown.admitted.agent.id.to_string(), "version": shown.admitted.version},
        "model": shown.admitted.config.model,
        "metadata": shown.metadata.as_map(),
        "error": null,
        "incomplete_details": null,
        "instructions": shown.dialect.instructions,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": shown.dialect.tools,
        "temperature": null,
        "top_p": null,
        "usage": null,
    })
}

/// A message being streamed: where it is in `output`, its id, its text so far.
struct Open {
    index: usize,
    id: String,
    text: String,
}

/// What the stream has shown: the items committed, and the message streaming now.
struct View {
    items: Items,
    open: Option<Open>,
    session: agentplane_domain::SessionId,
}

impl View {
    async fn show(&mut self, frames: &mut Frames, report: Watched) {
        match report {
            Watched::Text { seq, delta } => {
                let id = format!("msg_{}_{seq}", self.session);
                if self.open.as_ref().is_some_and(|open| open.id != id) {
                    self.close_open(frames, "incomplete").await;
                }
                if self.open.is_none() {
                    let index = self.items.items().len();
                    let item = json!({"id": id, "type": "message", "role": "assistant", "status": "in_progress", "content": []});
                    frames
                        .send("response.output_item.added", json!({"output_index": index, "item": item}))
                        .await;
                    let part = json!({"type": "output_text", "text": "", "annotations": []});
                    let at = json!({"item_id": id, "output_index": index, "content_index": 0, "part": part});
                    frames.send("response.content_part.added", at).await;
                    self.open = Some(Open { index, id: id.clone(), text: String::new() });
                }
                if let Some(open) = self.open.as_mut() {
                    open.text.push_str(&delta);
                    let at = json!({"item_id": open.id, "output_index": open.index, "content_index": 0, "delta": delta, "logprobs": []});
                    frames.send("response.output_text.delta", at).await;
                }
            }
            Watched::Committed(event) => {
                let added = self.items.push(&event);
                let all = self.items.items().len();
                for index in all - added..all {
                    let item = self.items.items()[index].clone();
                    let streamed = match (&item, &self.open) {
                        (OutputItem::Message { id, .. }, Some(open)) => *id == open.id,
                        _ => false,
                    };
                    if streamed {
                        if let Some(mut open) = self.open.take() {
                            open.text = item.text().unwrap_or_default().to_owned();
                            close(frames, &open, "completed").await;
                        }
                    } else {
                        frames.item(index, &item).await;
                    }
                }
            }
        }
    }

    async fn close_open(&mut self, frames: &mut Frames, status: &str) {
        if let Some(open) = self.open.take() {
            close(frames, &open, status).await;
        }
    }
}

/// The end of a streamed message: its text, its part, the item.
async fn close(frames: &mut Frames, open: &Open, status: &str) {
    let at = json!({"item_id": open.id, "output_index": open.index, "content_index": 0});
    frames
        .send("response.output_text.done", with(&with(&at, "text", json!(open.text)), "logprobs", json!([])))
        .await;
    let part = json!({"type": "output_text", "text": open.text, "annotations": []});
    frames.send("response.content_part.done", with(&at, "part", part.clone())).await;
    let item =
        json!({"id": open.id, "type": "message", "role": "assistant", "status": status, "content": [part]});
    frames.send("response.output_item.done", json!({"output_index": open.index, "item": item})).await;
}

/// Streams `work` in `session`.
pub(crate) fn stream(app: App, session: Session, shown: Shown, work: Work) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let mut frames = Frames { tx, sequence: 0 };
        let opened = opening(&session, &shown);
        frames.send("response.created", json!({"response": opened})).await;
        frames.send("response.in_progress", json!({"response": opened})).await;
        let (watch, mut reports) = mpsc::unbounded_channel();
        let engine = app.engine().watched(watch, true);
        let turn_session = session.clone();
        let turn_app = app.clone();
        // Its own task: the turn ends (and releases the session) even if the caller goes.
        let mut done = tokio::spawn(async move { work.perform(&turn_app, &engine, &turn_session).await });
        let mut view = View { items: Items::new(session.id), open: None, session: session.id };
        let outcome = loop {
            tokio::select! {
                report = reports.recv() => match report {
                    Some(report) => view.show(&mut frames, report).await,
                    // The engine is gone: the turn's task is over.
                    None => break (&mut done).await,
                },
                outcome = &mut done => {
                    // Its last reports may still wait in the channel.
                    while let Ok(report) = reports.try_recv() {
                        view.show(&mut frames, report).await;
                    }
                    break outcome;
                }
                () = tokio::time::sleep(KEEP_ALIVE) => {
                    let _ = frames.tx.send(Bytes::from_static(b": keep-alive\n\n")).await;
                }
            }
        };
        // A message whose step never committed (the model's stream broke, the session went):
        // it ends as far as it got.
        view.close_open(&mut frames, "incomplete").await;
        let items = view.items;
        match outcome {
            Ok(Ok(outcome)) => {
                let rendered = Rendered {
                    session_id: session.id,
                    output: items.into_items(),
                    instructions: shown.dialect.instructions.as_deref(),
                    tools: &shown.dialect.tools,
                    agent_id: shown.admitted.agent.id.to_string(),
                    version: shown.admitted.version,
                    model: &shown.admitted.config.model,
                    metadata: &shown.metadata,
                    created_at: shown.created_at,
                };
                let body = ResponseBody::new(rendered, &outcome);
                let kind = match body.status {
                    ResponseStatusName::Completed | ResponseStatusName::RequiresAction => {
                        "response.completed"
                    }
                    ResponseStatusName::Incomplete if body.error.is_some() => "response.failed",
                    ResponseStatusName::Incomplete => "response.incomplete",
                    ResponseStatusName::InProgress => "response.in_progress",
                };
                let response = serde_json::to_value(&body).unwrap_or_default();
                frames.send(kind, json!({"response": response})).await;
            }
            Ok(Err(err)) => {
                let error = err.to_api_error();
                frames
                    .send("error", json!({"code": error.code, "message": error.message, "param": error.extra.get("param")}))
                    .await;
                let mut failed = opening(&session, &shown);
                failed["status"] = json!("failed");
                failed["error"] = json!({"code": error.code, "message": error.message});
                frames.send("response.failed", json!({"response": failed})).await;
            }
            Err(_) => {
                frames
                    .send("error", json!({"code": "internal_error", "message": "the turn task failed"}))
                    .await;
            }
        }
    });
    crate::sse::event_stream(rx)
}
