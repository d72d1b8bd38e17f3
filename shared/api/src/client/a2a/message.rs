//! A `message/send` or `message/stream` call, read and decided before anything runs: a new
//! turn, or the answers to what a waiting turn asks.

use std::time::Duration;

use agentplane_domain::a2a::{self, Part, PartsError, TaskId};
use agentplane_domain::action::{Action, Answer};
use agentplane_domain::session::{NewSession, RuntimeStatus, Session, SessionBudget};
use agentplane_domain::{SessionId, ValidationError};
use agentplane_engine::admission::{Refused, TurnInput};
use agentplane_engine::{TurnContext, TurnRequest};
use serde_json::{Map, Value};

use super::ctx::Ctx;
use super::rpc::{self, RpcError};
use super::task;
use crate::client::error::ClientError;
use crate::edge;

/// What a message comes to, decided (and checked) before anything runs.
pub(super) enum Prepared {
    /// It answers the actions the session's turn waits for.
    Answer { id: TaskId, answers: Vec<(Action, Answer)> },
    /// It starts a turn.
    Turn { id: TaskId, request: Box<TurnRequest>, session: Box<Session>, after: u64 },
}

impl Prepared {
    pub(super) fn task_id(&self) -> &TaskId {
        match self {
            Self::Answer { id, .. } | Self::Turn { id, .. } => id,
        }
    }
}

pub(super) fn string_param<'a>(
    params: &'a Map<String, Value>,
    name: &str,
) -> Result<Option<&'a str>, RpcError> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ValidationError::new(name, format!("`{name}` must be a string")).into()),
    }
}

pub(super) fn history_length(params: &Map<String, Value>, name: &str) -> Result<Option<usize>, RpcError> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().and_then(|n| usize::try_from(n).ok()).map(Some).ok_or_else(|| {
            ValidationError::new(name, format!("`{name}` must be a non-negative integer")).into()
        }),
    }
}

/// A task id of the params; a malformed one is a task that does not exist.
pub(super) fn task_param(params: &Map<String, Value>, name: &str) -> Result<Option<TaskId>, RpcError> {
    string_param(params, name)?
        .map(|text| text.parse::<TaskId>().map_err(|()| RpcError::task_not_found()))
        .transpose()
}

/// Reads a `message/send` or `message/stream` call and decides what it comes to.
pub(super) async fn prepare(ctx: &Ctx, params: &Map<String, Value>) -> Result<Prepared, RpcError> {
    let Some(Value::Object(message)) = params.get("message") else {
        return Err(ValidationError::new("message", "`message` must be an object").into());
    };
    if let Some(config) = params.get("configuration")
        && !matches!(config, Value::Object(_) | Value::Null)
    {
        return Err(ValidationError::new("configuration", "`configuration` must be an object").into());
    }
    if message.get("role").and_then(Value::as_str) != Some("user") {
        return Err(ValidationError::new("message.role", "`message.role` must be \"user\"").into());
    }
    match message.get("messageId") {
        Some(Value::String(s)) if !s.is_empty() => {}
        _ => {
            return Err(
                ValidationError::new("message.messageId", "`message.messageId` must be a string").into()
            );
        }
    }
    let parts = a2a::parts(message.get("parts")).map_err(|err| match err {
        PartsError::Invalid(e) => RpcError::from(e),
        PartsError::FileParts => RpcError::new(
            rpc::CONTENT_TYPE_NOT_SUPPORTED,
            "`file` parts are not taken over A2A: send text or data parts",
        ),
    })?;
    let task = task_param(message, "taskId")?;
    let context = string_param(message, "contextId")?;
    let context: Option<SessionId> = match context {
        Some(text) => Some(text.parse().map_err(|_| context_not_found())?),
        None => None,
    };
    if let (Some(task), Some(context)) = (&task, &context)
        && task.session != *context
    {
        return Err(ValidationError::new("message.contextId", "`taskId` is a task of another context").into());
    }
    let session_id = task.as_ref().map(|t| t.session).or(context);
    let Some(session_id) = session_id else {
        return new_turn(ctx, None, &parts).await;
    };
    let (session, context_read) =
        match ctx.app.engine().session_for_turn(&ctx.auth.project_id, &session_id).await {
            Ok(found) if found.0.agent_id == Some(ctx.admitted.agent.id) => found,
            Ok(_) | Err(Refused::SessionNotFound) => {
                return Err(if task.is_some() { RpcError::task_not_found() } else { context_not_found() });
            }
            Err(err) => return Err(ClientError::from(err).into()),
        };
    let now = edge::now();
    let waiting = session.clone().settled(now).runtime_status == RuntimeStatus::RequiresAction;
    let current = session.current_turn_id.clone();
    if let Some(task) = &task
        && (!waiting || current.as_deref() != Some(task.turn_id.as_str()))
    {
        let found = task::load(&ctx.app, &ctx.auth.project_id, &ctx.admitted.agent.id, task, Some(0)).await?;
        return Err(match found.state.is_terminal() {
            true => RpcError::new(
                rpc::UNSUPPORTED_OPERATION,
                format!(
                    "the task is {}: send a message without `taskId` to start a new task in its context",
                    found.state.as_str()
                ),
            ),
            false => ClientError::SessionBusy { session_id: Some(session.id.to_string()) }.into(),
        });
    }
    match (waiting, current) {
        (true, Some(turn_id)) => {
            let id = TaskId::new(session.id, turn_id);
            let answers = answers(ctx, &session, &id, &parts).await?;
            Ok(Prepared::Answer { id, answers })
        }
        _ => new_turn(ctx, Some((session, context_read)), &parts).await,
    }
}

pub(super) fn context_not_found() -> RpcError {
    ValidationError::new("message.contextId", "`contextId` names no conversation of this agent").into()
}

/// The answers a message gives the actions the turn `id` waits for: one action takes the
/// message as its answer; several take a `data` part keyed by action id.
pub(super) async fn answers(
    ctx: &Ctx,
    session: &Session,
    id: &TaskId,
    parts: &[Part],
) -> Result<Vec<(Action, Answer)>, RpcError> {
    let pending: Vec<Action> = ctx
        .app
        .store
        .actions()
        .pending(&ctx.auth.project_id, &session.id)
        .await?
        .into_iter()
        .filter(|a| a.turn_id == id.turn_id)
        .collect();
    let mut out = Vec::with_capacity(pending.len());
    match pending.as_slice() {
        [] => {}
        [one] => {
            let body = a2a::answer_body(one.kind, parts)?;
            out.push((one.clone(), Answer::from_body(one.kind, &body)?));
        }
        several => {
            let keyed = parts.iter().find_map(|p| match p {
                Part::Data(d) => Some(d),
                Part::Text(_) => None,
            });
            let ids: Vec<String> = several.iter().map(|a| a.id.to_string()).collect();
            let Some(keyed) = keyed else {
                return Err(ValidationError::new(
                    "message.parts",
                    format!(
                        "the task waits for {} actions ({}): answer them in a data part keyed by action id",
                        ids.len(),
                        ids.join(", ")
                    ),
                )
                .into());
            };
            for action in several {
                let Some(Value::Object(body)) = keyed.get(&action.id.to_string()) else { continue };
                out.push((action.clone(), Answer::from_body(action.kind, body)?));
            }
            if out.is_empty() {
                return Err(ValidationError::new(
                    "message.parts",
                    format!("the data part answers none of the pending actions ({})", ids.join(", ")),
                )
                .into());
            }
        }
    }
    Ok(out)
}

/// A new turn of the published version, in `found` or in a new session; its text is the text
/// parts, then each data part as JSON.
pub(super) async fn new_turn(
    ctx: &Ctx,
    found: Option<(Session, TurnContext)>,
    parts: &[Part],
) -> Result<Prepared, RpcError> {
    let mut lines: Vec<String> = Vec::new();
    for part in parts {
        match part {
            Part::Text(t) => lines.push(t.clone()),
            Part::Data(d) => lines.push(Value::Object(d.clone()).to_string()),
        }
    }
    let text = lines.join("\n");
    if text.trim().is_empty() {
        return Err(ValidationError::new("message.parts", "the message has no text").into());
    }
    if text.chars().count() > crate::client::responses::validation::MAX_INPUT_CHARS {
        return Err(ValidationError::new(
            "message.parts",
            format!(
                "the message may be at most {} characters",
                crate::client::responses::validation::MAX_INPUT_CHARS
            ),
        )
        .into());
    }
    let tenant =
        ctx.app.engine().admit_spend(ctx.admitted.tenant, edge::now()).await.map_err(ClientError::from)?;
    let (session, context) = match found {
        Some(found) => found,
        None => {
            let id =
                SessionId::from_random(edge::random().map_err(|_| ClientError::internal("no randomness"))?);
            let new = NewSession { agent_id: Some(ctx.admitted.agent.id), ..NewSession::default() };
            let session = new.into_session(id, ctx.auth.project_id, edge::now());
            ctx.app.store.sessions().create(&session).await?;
            (session, TurnContext::default())
        }
    };
    let budget = SessionBudget::effective(session.budget, &ctx.admitted.agent.execution);
    if budget.is_some() && ctx.app.prices.price(&ctx.admitted.config.model).is_none() {
        return Err(ClientError::ModelNotPriced { model: ctx.admitted.config.model.clone() }.into());
    }
    // Named here (the task id is the session and the turn) as the engine names its turns.
    let turn_id = format!("turn_{}", agentplane_engine::random::unique_hex::<12>());
    let timeout =
        ctx.app.sync_ceiling.min(Duration::from_millis(ctx.admitted.agent.execution.sync_timeout_ms));
    let after = context.last_event_seq;
    let given = TurnInput { input: text, tenant, turn_id: Some(turn_id.clone()), ..TurnInput::default() };
    let request = ctx.admitted.request(&session, context, given, tokio::time::Instant::now() + timeout);
    Ok(Prepared::Turn {
        id: TaskId::new(session.id, turn_id),
        request: Box::new(request),
        session: Box::new(session),
        after,
    })
}
