//! A task as A2A shows it, read from what a client reads of a turn: its events in the session's
//! log (messages, the end) and, while it waits, the actions it waits for.

use agentplane_domain::a2a::{TaskId, TaskState};
use agentplane_domain::action::{Action, ActionType};
use agentplane_domain::event::{Event, EventPayload};
use agentplane_domain::ids::AgentId;
use agentplane_domain::page::PageLimit;
use agentplane_domain::session::Session;
use agentplane_domain::{ProjectId, Timestamp};
use serde_json::{Value, json};

use super::rpc::RpcError;
use crate::App;
use crate::edge;

/// A task and the state it is in.
pub struct Task {
    pub state: TaskState,
    pub value: Value,
}

/// A message of a task (`role` `user` or `agent`), its id the event's place in the session.
pub fn message(id: &TaskId, role: &str, message_id: &str, parts: &[Value]) -> Value {
    json!({
        "kind": "message",
        "role": role,
        "messageId": message_id,
        "parts": parts,
        "taskId": id.to_string(),
        "contextId": id.session.to_string(),
    })
}

pub fn text_part(text: &str) -> Value {
    json!({"kind": "text", "text": text})
}

/// The session of a task, if it is the caller's and `agent`'s.
pub async fn session_of(
    app: &App,
    project: &ProjectId,
    agent: &AgentId,
    id: &TaskId,
) -> Result<Session, RpcError> {
    match app.store.sessions().get(project, &id.session).await {
        Ok(session) if session.agent_id == Some(*agent) => Ok(session),
        Ok(_) | Err(agentplane_store::StoreError::NotFound) => Err(RpcError::task_not_found()),
        Err(err) => Err(err.into()),
    }
}

/// The events of the turn, from `after` on (exclusive).
pub async fn turn_events(app: &App, id: &TaskId, mut after: u64) -> Result<Vec<Event>, RpcError> {
    let limit = PageLimit::new(100).map_err(RpcError::from)?;
    let mut out = Vec::new();
    loop {
        let page = app.store.events().list_after(&id.session, after, limit).await?;
        after = page.items.last().map_or(after, |e| e.seq);
        out.extend(page.items.into_iter().filter(|e| e.turn_id.as_deref() == Some(id.turn_id.as_str())));
        if !page.has_more {
            return Ok(out);
        }
    }
}

/// The task `id` of `agent` in the caller's project: not found when the session is another
/// project's or agent's, or holds no such turn.
pub async fn load(
    app: &App,
    project: &ProjectId,
    agent: &AgentId,
    id: &TaskId,
    history_length: Option<usize>,
) -> Result<Task, RpcError> {
    let session = session_of(app, project, agent, id).await?;
    let events = turn_events(app, id, 0).await?;
    if events.is_empty() {
        return Err(RpcError::task_not_found());
    }
    render(app, &session, id, &events, history_length).await
}

/// What the task waits for, in words and as data.
fn waiting_message(id: &TaskId, actions: &[Action]) -> Value {
    let lines: Vec<String> = actions
        .iter()
        .map(|a| match a.kind {
            ActionType::Question => a.question.clone().unwrap_or_else(|| "The agent asks a question.".into()),
            ActionType::Approval => {
                format!("Approve the tool `{}` with {}? Answer yes or no.", a.tool, a.args)
            }
            ActionType::ClientTool => {
                format!("Run the client tool `{}` with {} and send its output.", a.tool, a.args)
            }
        })
        .collect();
    let data: Vec<Value> = actions
        .iter()
        .map(|a| {
            json!({
                "id": a.id.to_string(),
                "type": a.kind.as_str(),
                "tool": a.tool,
                "args": a.args,
                "question": a.question,
                "expires_at": a.expires_at.map(Timestamp::unix_seconds),
            })
        })
        .collect();
    message(
        id,
        "agent",
        &format!("{id}:waiting"),
        &[text_part(&lines.join("\n")), json!({"kind": "data", "data": {"actions": data}})],
    )
}

/// The task from its turn's events (oldest first) and the session as it is now.
pub async fn render(
    app: &App,
    session: &Session,
    id: &TaskId,
    events: &[Event],
    history_length: Option<usize>,
) -> Result<Task, RpcError> {
    let now = edge::now();
    let mut history = Vec::new();
    let mut answer: Option<String> = None;
    let mut ended = None;
    let mut failure: Option<String> = None;
    for event in events {
        match event.payload() {
            EventPayload::UserMessage(m) => {
                history.push(message(
                    id,
                    "user",
                    &format!("{}:{}", id.session, event.seq),
                    &[text_part(&m.text)],
                ));
            }
            EventPayload::AssistantMessage(m) => {
                history.push(message(
                    id,
                    "agent",
                    &format!("{}:{}", id.session, event.seq),
                    &[text_part(&m.text)],
                ));
                answer = Some(m.text);
            }
            EventPayload::Error(f) => failure = Some(f.message),
            EventPayload::TurnEnded(t) => ended = Some((t.stop_reason, t.limit)),
            _ => {}
        }
    }
    let current = session.current_turn_id.as_deref() == Some(id.turn_id.as_str());
    let state = match &ended {
        Some((reason, _)) => TaskState::of_ending(*reason),
        None => TaskState::of_unended(current, session.clone().settled(now).runtime_status),
    };
    let status_message = match state {
        TaskState::InputRequired => {
            let pending = app.store.actions().pending(&session.project_id, &session.id).await?;
            let mine: Vec<Action> = pending.into_iter().filter(|a| a.turn_id == id.turn_id).collect();
            Some(waiting_message(id, &mine))
        }
        TaskState::Failed => {
            let why = failure.or_else(|| match &ended {
                Some((_, Some(limit))) => Some(format!("the turn stopped at its limit ({limit})")),
                Some((reason, None)) => {
                    Some(format!("the turn ended: {}", serde_json::to_value(reason).unwrap_or_default()))
                }
                None => None,
            });
            why.map(|text| message(id, "agent", &format!("{id}:status"), &[text_part(&text)]))
        }
        _ => None,
    };
    let mut status = json!({
        "state": state.as_str(),
        "timestamp": events.last().map_or(now, |e| e.created_at).rfc3339(),
    });
    if let (Some(m), Value::Object(map)) = (status_message, &mut status) {
        map.insert("message".into(), m);
    }
    let artifacts: Vec<Value> = match (state, answer) {
        (TaskState::Completed, Some(text)) => vec![json!({
            "artifactId": format!("{id}:answer"),
            "name": "answer",
            "parts": [text_part(&text)],
        })],
        _ => Vec::new(),
    };
    if let Some(n) = history_length {
        let skip = history.len().saturating_sub(n);
        history.drain(..skip);
    }
    let stop_reason = ended.map(|(r, _)| serde_json::to_value(r).unwrap_or_default());
    let value = json!({
        "kind": "task",
        "id": id.to_string(),
        "contextId": id.session.to_string(),
        "status": status,
        "history": history,
        "artifacts": artifacts,
        "metadata": {"session_id": id.session.to_string(), "turn_id": id.turn_id, "stop_reason": stop_reason},
    });
    Ok(Task { state, value })
}
