//! `message/stream`: the task's updates as Server-Sent Events.

use axum::body::Bytes;
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::ctx::Ctx;
use super::message::Prepared;
use super::rpc;
use super::run::execute;
use super::task;
use crate::edge;

/// How often an open `message/stream` says it is still there while the turn runs.
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

pub(super) fn frame(id: &Value, result: &Value) -> Bytes {
    Bytes::from(format!("data: {}\n\n", rpc::result(id, result)))
}

/// `message/stream`: the task as it starts, then (when it stops working or waits) its
/// artifacts and its final status, each a JSON-RPC answer in a `data:` frame.
pub(super) fn stream(ctx: Ctx, id: Value, prepared: Prepared) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        let task_id = prepared.task_id().clone();
        let (task, context) = (task_id.to_string(), task_id.session.to_string());
        let first = match &prepared {
            Prepared::Turn { request, .. } => json!({
                "kind": "task",
                "id": task,
                "contextId": context,
                "status": {"state": "submitted", "timestamp": edge::now().rfc3339()},
                "history": [task::message(&task_id, "user", &format!("{task}:input"), &[task::text_part(&request.input)])],
                "artifacts": [],
            }),
            Prepared::Answer { .. } => json!({
                "kind": "status-update",
                "taskId": task,
                "contextId": context,
                "status": {"state": "working", "timestamp": edge::now().rfc3339()},
                "final": false,
            }),
        };
        if tx.send(frame(&id, &first)).await.is_err() {
            // The caller went: the work runs on all the same (the turn must end).
        }
        let work = execute(&ctx, prepared);
        tokio::pin!(work);
        let outcome = loop {
            tokio::select! {
                outcome = &mut work => break outcome,
                () = tokio::time::sleep(KEEP_ALIVE) => {
                    let _ = tx.send(Bytes::from_static(b": keep-alive\n\n")).await;
                }
            }
        };
        match outcome {
            Ok(done) => {
                for artifact in done.value["artifacts"].as_array().cloned().unwrap_or_default() {
                    let update = json!({
                        "kind": "artifact-update",
                        "taskId": task,
                        "contextId": context,
                        "artifact": artifact,
                        "lastChunk": true,
                    });
                    let _ = tx.send(frame(&id, &update)).await;
                }
                let status = json!({
                    "kind": "status-update",
                    "taskId": task,
                    "contextId": context,
                    "status": done.value["status"],
                    "final": true,
                });
                let _ = tx.send(frame(&id, &status)).await;
            }
            Err(error) => {
                let _ = tx.send(Bytes::from(format!("data: {}\n\n", rpc::error(&id, &error)))).await;
            }
        }
    });
    crate::sse::event_stream(rx)
}
