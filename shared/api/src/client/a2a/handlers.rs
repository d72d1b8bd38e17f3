//! An agent over A2A: its card, and one JSON-RPC endpoint for `message/send`,
//! `message/stream`, `tasks/get` and `tasks/cancel`. A task is one turn of the agent's newest
//! published version (API traffic runs the published version); its context is the session. A
//! turn that pauses for an action is `input-required`, and the caller's next message in that
//! context answers it: the same turn carries on in this call.

use std::convert::Infallible;
use std::time::Duration;

use agentplane_domain::a2a::{self, Part, PartsError, TaskId, TaskState};
use agentplane_domain::action::{Action, ActionStatus, Answer, Continuation};
use agentplane_domain::agent::Channel;
use agentplane_domain::ids::AgentId;
use agentplane_domain::session::{NewSession, RuntimeStatus, Session, SessionBudget};
use agentplane_domain::{SessionId, ValidationError};
use agentplane_engine::admission::{Admitted, Refused, TurnInput};
use agentplane_engine::continuation::Continued;
use agentplane_engine::titles::FirstTurn;
use agentplane_engine::{TurnContext, TurnRequest};
use agentplane_store::StoreError;
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::rpc::{self, RpcError};
use super::task::{self, Task};
use super::wire::{A2aRequest, A2aResponse, AgentCard};
use crate::body::{BodyError, MAX_BODY_BYTES};
use crate::client::auth::ProjectAuth;
use crate::client::error::ClientError;
use crate::envelope::ErrorEnvelope;
use crate::{App, edge};

const PROTOCOL_VERSION: &str = "0.3.0";
/// How often an open `message/stream` says it is still there while the turn runs.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What every call of the endpoint works with: the caller, and the agent's published version.
#[derive(Clone)]
struct Ctx {
    app: App,
    auth: ProjectAuth,
    admitted: Admitted,
    /// The published version the agent runs (`admitted.version`, known to be set).
    version: u32,
}

/// The agent of the path, published: another project's (or a malformed id) is not found.
async fn published(app: &App, auth: &ProjectAuth, agent_id: &str) -> Result<Ctx, ClientError> {
    let id: AgentId = agent_id.parse().map_err(|_| ClientError::AgentNotFound)?;
    let engine = app.engine();
    let found = engine.turn_agent(&auth.project_id, &id).await?;
    let admitted = engine.admit(found, Channel::Published, None).await?;
    let version = admitted.version.ok_or(ClientError::AgentNotPublished)?;
    Ok(Ctx { app: app.clone(), auth: *auth, admitted, version })
}

/// Where clients reach this deployment, never from a request header (a client could name any
/// host there, and the card would send the next caller's key to it): the configured public
/// URL (`AGENTPLANE_PUBLIC_URL`; the local gateway's default is its listen address), else the
/// domain and stage API Gateway itself invoked the function for, else `http://localhost`.
fn public_base(app: &App, extensions: &http::Extensions) -> String {
    if let Some(url) = &app.public_url {
        return url.clone();
    }
    if let Some(invoked) = extensions.get::<crate::edge::InvokedAt>() {
        return match &invoked.stage {
            Some(stage) => format!("https://{}/{stage}", invoked.domain),
            None => format!("https://{}", invoked.domain),
        };
    }
    "http://localhost".to_owned()
}

/// An agent's A2A card.
///
/// The card of the agent's newest published version: its name, the JSON-RPC endpoint, that it
/// streams, and that calls carry the project key as a bearer token.
#[utoipa::path(
    get,
    path = "/api/client/v1/agents/{agent_id}/a2a/.well-known/agent-card.json",
    tag = "client",
    operation_id = "client-agent-a2a-card",
    params(("agent_id" = String, Path, description = "The agent's id.")),
    responses(
        (status = 200, description = "The agent card.", body = AgentCard),
        (status = 401, description = "No valid project key.", body = ErrorEnvelope),
        (status = 404, description = "No such agent in this project (`agent_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The agent has no published version (`agent_not_published`).", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn card(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(agent_id): Path<String>,
    extensions: http::Extensions,
) -> Result<Response, ClientError> {
    let ctx = published(&app, &auth, &agent_id).await?;
    // The name the published version goes by (its experience settings), else the agent's.
    let name = ctx
        .admitted
        .config
        .experience
        .display_name
        .clone()
        .unwrap_or_else(|| ctx.admitted.agent.name.as_str().to_owned());
    let card = AgentCard {
        protocol_version: PROTOCOL_VERSION.into(),
        description: format!("{name}, an Agentplane agent (published version {}).", ctx.version),
        name: name.clone(),
        url: format!("{}/api/client/v1/agents/{}/a2a", public_base(&app, &extensions), ctx.admitted.agent.id),
        preferred_transport: "JSONRPC".into(),
        version: ctx.version.to_string(),
        capabilities: json!({"streaming": true, "pushNotifications": false, "stateTransitionHistory": false}),
        default_input_modes: vec!["text/plain".into(), "application/json".into()],
        default_output_modes: vec!["text/plain".into(), "application/json".into()],
        skills: vec![json!({
            "id": "conversation",
            "name": name,
            "description": "Talk with the agent; it may ask a question or an approval (input-required), which your next message answers.",
            "tags": ["chat"],
        })],
        security_schemes: json!({"projectKey": {"type": "http", "scheme": "bearer", "description": "A project key (cpeer_…)."}}),
        security: vec![json!({"projectKey": []})],
    };
    let mut response = Json(card).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// An agent's A2A endpoint (JSON-RPC 2.0).
///
/// `message/send` runs a turn (a task) and answers the task when it ends or waits for input;
/// `message/stream` answers Server-Sent Events, each `data:` a JSON-RPC answer (the task, then
/// its artifact and its final status); `tasks/get` and `tasks/cancel` take `{id}`. A message
/// with the `contextId` of a task that is `input-required` answers what it waits for (a text
/// yes/no for an approval, the text as a question's answers or a client tool's output, or a
/// `data` part with the answer's body) and the same turn carries on. Every failure past
/// authentication and the agent is a JSON-RPC error object (HTTP 200).
#[utoipa::path(
    post,
    path = "/api/client/v1/agents/{agent_id}/a2a",
    tag = "client",
    operation_id = "client-agent-a2a-rpc",
    params(("agent_id" = String, Path, description = "The agent's id.")),
    request_body = A2aRequest,
    responses(
        (status = 200, description = "A JSON-RPC answer (a result or an error object); for `message/stream`, an event stream of JSON-RPC answers.", content(
            (A2aResponse = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 401, description = "No valid project key.", body = ErrorEnvelope),
        (status = 404, description = "No such agent in this project (`agent_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The agent has no published version (`agent_not_published`).", body = ErrorEnvelope),
        (status = 413, description = "The body is too large.", body = ErrorEnvelope),
        (status = 503, description = "Storage is unavailable; try again.", body = ErrorEnvelope),
    ),
)]
pub async fn rpc(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(agent_id): Path<String>,
    body: Body,
) -> Result<Response, ClientError> {
    let ctx = published(&app, &auth, &agent_id).await?;
    let bytes = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) if err.downcast_ref::<LengthLimitError>().is_some() => {
            return Err(ClientError::Body(BodyError::TooLarge));
        }
        Err(_) => return Err(ClientError::Body(BodyError::Unreadable)),
    };
    let request = match rpc::parse(&bytes) {
        Ok(request) => request,
        Err((id, error)) => return Ok(answer(&id, Err(error))),
    };
    let id = request.id.clone();
    let outcome = match request.method.as_str() {
        "message/send" => match prepare(&ctx, &request.params).await {
            Ok(prepared) => execute(&ctx, prepared).await.map(|t| t.value),
            Err(err) => Err(err),
        },
        "message/stream" => match prepare(&ctx, &request.params).await {
            Ok(prepared) => return Ok(stream(ctx, id, prepared)),
            Err(err) => Err(err),
        },
        "tasks/get" => get(&ctx, &request.params).await.map(|t| t.value),
        "tasks/cancel" => cancel(&ctx, &request.params).await.map(|t| t.value),
        "tasks/pushNotificationConfig/set"
        | "tasks/pushNotificationConfig/get"
        | "tasks/pushNotificationConfig/list"
        | "tasks/pushNotificationConfig/delete" => {
            Err(RpcError::new(rpc::PUSH_NOTIFICATION_NOT_SUPPORTED, "push notifications are not supported"))
        }
        "tasks/resubscribe" | "agent/getAuthenticatedExtendedCard" => {
            Err(RpcError::new(rpc::UNSUPPORTED_OPERATION, format!("`{}` is not supported", request.method)))
        }
        other => Err(RpcError::new(
            rpc::METHOD_NOT_FOUND,
            format!("no method `{}`", crate::edge::quote::quote(other)),
        )),
    };
    Ok(answer(&id, outcome))
}

fn answer(id: &Value, outcome: Result<Value, RpcError>) -> Response {
    let body = match outcome {
        Ok(value) => rpc::result(id, &value),
        Err(error) => {
            if error.code == rpc::INTERNAL_ERROR {
                tracing::warn!(message = %error.message, "a2a call failed");
            }
            rpc::error(id, &error)
        }
    };
    let mut response = Json(body).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// What a message comes to, decided (and checked) before anything runs.
enum Prepared {
    /// It answers the actions the session's turn waits for.
    Answer { id: TaskId, answers: Vec<(Action, Answer)> },
    /// It starts a turn.
    Turn { id: TaskId, request: Box<TurnRequest>, session: Box<Session>, after: u64 },
}

impl Prepared {
    fn task_id(&self) -> &TaskId {
        match self {
            Self::Answer { id, .. } | Self::Turn { id, .. } => id,
        }
    }
}

fn string_param<'a>(params: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, RpcError> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ValidationError::new(name, format!("`{name}` must be a string")).into()),
    }
}

fn history_length(params: &Map<String, Value>, name: &str) -> Result<Option<usize>, RpcError> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().and_then(|n| usize::try_from(n).ok()).map(Some).ok_or_else(|| {
            ValidationError::new(name, format!("`{name}` must be a non-negative integer")).into()
        }),
    }
}

/// A task id of the params; a malformed one is a task that does not exist.
fn task_param(params: &Map<String, Value>, name: &str) -> Result<Option<TaskId>, RpcError> {
    string_param(params, name)?
        .map(|text| text.parse::<TaskId>().map_err(|()| RpcError::task_not_found()))
        .transpose()
}

/// Reads a `message/send` or `message/stream` call and decides what it comes to.
async fn prepare(ctx: &Ctx, params: &Map<String, Value>) -> Result<Prepared, RpcError> {
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

fn context_not_found() -> RpcError {
    ValidationError::new("message.contextId", "`contextId` names no conversation of this agent").into()
}

/// The answers a message gives the actions the turn `id` waits for: one action takes the
/// message as its answer; several take a `data` part keyed by action id.
async fn answers(
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
async fn new_turn(
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
    let random: [u8; 12] = edge::random().map_err(|_| ClientError::internal("no randomness"))?;
    let turn_id = format!("turn_{}", random.iter().map(|b| format!("{b:02x}")).collect::<String>());
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

/// Runs what the message comes to and answers the task as it is then.
async fn execute(ctx: &Ctx, prepared: Prepared) -> Result<Task, RpcError> {
    match prepared {
        Prepared::Turn { id, request, session, after } => {
            let engine = ctx.app.engine();
            // Its own task: the turn ends (and releases the session) even if the caller goes.
            let input = request.input.clone();
            let outcome = engine
                .run_held(*request)
                .await
                .ok_or_else(|| ClientError::internal("the turn task failed"))?
                .map_err(|err| ClientError::turn(err, session.id.to_string()))?;
            let answer = outcome.output_text.as_deref();
            let turn =
                FirstTurn { model: ctx.app.title_model.as_deref(), first: after == 0, input: &input, answer };
            engine.title_after(&session, turn).await;
            let session = ctx.app.store.sessions().get(&ctx.auth.project_id, &session.id).await?;
            let events = task::turn_events(&ctx.app, &id, after).await?;
            task::render(&ctx.app, &session, &id, &events, None).await
        }
        Prepared::Answer { id, answers } => {
            let settled = settle(ctx, answers).await?;
            let pending = ctx.app.store.actions().pending(&ctx.auth.project_id, &id.session).await?;
            if let Some(first) = settled.first()
                && !pending.iter().any(|a| a.turn_id == id.turn_id)
            {
                let continuation = Continuation {
                    project_id: ctx.auth.project_id,
                    session_id: id.session,
                    turn_id: id.turn_id.clone(),
                    version: first.pause_version,
                };
                // The turn carries on in this call; the claim is conditional, so a
                // continuation the retention sweep sends meanwhile does nothing more.
                let continued = ctx.app.engine().continue_turn(&continuation).await?;
                for action in &settled {
                    if let Err(err) = ctx.app.store.actions().mark_carried_on(action).await {
                        tracing::warn!(action = %action.id, error = %err, "carried-on mark not written");
                    }
                }
                if matches!(continued, Continued::Stale) {
                    return until_settled(ctx, &id).await;
                }
            }
            task::load(&ctx.app, &ctx.auth.project_id, &ctx.admitted.agent.id, &id, None).await
        }
    }
}

/// Settles each answered action (one conditional update each), as the actions route does: an
/// action past its expiry is recorded expired and refused.
async fn settle(ctx: &Ctx, answers: Vec<(Action, Answer)>) -> Result<Vec<Action>, RpcError> {
    // Who may answer is checked for every action before any is settled.
    if answers.iter().any(|(action, _)| !action.may_answer(&ctx.auth.key_id)) {
        return Err(ClientError::AnswerNotPermitted.into());
    }
    let store = ctx.app.store.actions();
    let mut settled = Vec::with_capacity(answers.len());
    for (action, answer) in answers {
        let now = edge::now();
        let overdue = action.expires_at.is_some_and(|at| at <= now);
        let (status, answer) =
            if overdue { (ActionStatus::Expired, None) } else { (ActionStatus::Resolved, Some(answer)) };
        match store.settle(&action, status, answer, now).await {
            Ok(done) if overdue => {
                let _ = agentplane_engine::continuation::carry_on_if_settled(&ctx.app.store, &done).await;
                return Err(ClientError::ActionNotPending { action_status: done.status }.into());
            }
            Ok(done) => settled.push(done),
            Err(StoreError::Conflict) => {
                let current = store.get(&ctx.auth.project_id, &action.session_id, &action.id).await?;
                return Err(ClientError::ActionNotPending { action_status: current.status }.into());
            }
            Err(err) => return Err(err.into()),
        }
    }
    Ok(settled)
}

/// Another delivery carries the turn on: the task once it stops working (or at the call's
/// ceiling, as it is then).
async fn until_settled(ctx: &Ctx, id: &TaskId) -> Result<Task, RpcError> {
    let deadline = tokio::time::Instant::now()
        + ctx.app.sync_ceiling.min(Duration::from_millis(ctx.admitted.agent.execution.sync_timeout_ms));
    loop {
        let task = task::load(&ctx.app, &ctx.auth.project_id, &ctx.admitted.agent.id, id, None).await?;
        if task.state != TaskState::Working || tokio::time::Instant::now() >= deadline {
            return Ok(task);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn get(ctx: &Ctx, params: &Map<String, Value>) -> Result<Task, RpcError> {
    let id = task_param(params, "id")?
        .ok_or_else(|| RpcError::from(ValidationError::new("id", "`id` is required")))?;
    let history = history_length(params, "historyLength")?;
    task::load(&ctx.app, &ctx.auth.project_id, &ctx.admitted.agent.id, &id, history).await
}

/// Cancels a task that has not ended: a waiting one ends at once, a working one at its next
/// step (the task answered is then still `working`).
async fn cancel(ctx: &Ctx, params: &Map<String, Value>) -> Result<Task, RpcError> {
    let id = task_param(params, "id")?
        .ok_or_else(|| RpcError::from(ValidationError::new("id", "`id` is required")))?;
    let found = task::load(&ctx.app, &ctx.auth.project_id, &ctx.admitted.agent.id, &id, Some(0)).await?;
    let not_cancelable = |state: TaskState| {
        let mut error = RpcError::new(rpc::TASK_NOT_CANCELABLE, format!("the task is {}", state.as_str()));
        error.data = Some(json!({"state": state.as_str()}));
        error
    };
    if found.state.is_terminal() || found.state == TaskState::Unknown {
        return Err(not_cancelable(found.state));
    }
    let cancelled = crate::client::sessions::handlers::cancel(
        State(ctx.app.clone()),
        ctx.auth,
        Path(id.session.to_string()),
    )
    .await;
    match cancelled {
        Ok(_) => {}
        // It ended meanwhile.
        Err(ClientError::NothingToCancel { .. }) => {
            let now =
                task::load(&ctx.app, &ctx.auth.project_id, &ctx.admitted.agent.id, &id, Some(0)).await?;
            return Err(not_cancelable(now.state));
        }
        Err(err) => return Err(err.into()),
    }
    task::load(&ctx.app, &ctx.auth.project_id, &ctx.admitted.agent.id, &id, None).await
}

fn frame(id: &Value, result: &Value) -> Bytes {
    Bytes::from(format!("data: {}\n\n", rpc::result(id, result)))
}

/// `message/stream`: the task as it starts, then (when it stops working or waits) its
/// artifacts and its final status, each a JSON-RPC answer in a `data:` frame.
fn stream(ctx: Ctx, id: Value, prepared: Prepared) -> Response {
    let (tx, mut rx) = mpsc::channel::<Bytes>(16);
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
    let body = Body::from_stream(futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx).map(|chunk| chunk.map(Ok::<_, Infallible>))
    }));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
