use agentplane_domain::SessionId;
use agentplane_domain::action::{Action, Answer};
use agentplane_domain::agent::Channel;
use agentplane_domain::ids::AgentId;
use agentplane_domain::metadata::Metadata;
use agentplane_domain::session::{NewSession, Session, SessionBudget};
use agentplane_engine::TurnContext;
use agentplane_engine::Watched;
use agentplane_engine::admission::{Admitted, Refused, TurnInput};
use agentplane_engine::continuation::Continued;
use agentplane_engine::titles::FirstTurn;
use agentplane_store::dynamo::agents::TurnAgent;
use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

pub(crate) use super::dialect::Dialect;
use super::dialect::{answers_calls, check_model, target_session};
use super::fields::{self, Route};
use super::output::Items;
use super::validation::{CallOutput, FileRef, InputExtras, background, callback_url, input_items};
use super::wire::{CreateResponse, CreateSessionMessage, Rendered, ResponseBody, ResponsesError};
use crate::body::JsonObject;
use crate::client::auth::ProjectAuth;
use crate::client::error::ClientError;
use crate::client::files::input::Images;
use crate::envelope::ErrorEnvelope;
use crate::{App, edge};

/// How a route reports a missing or unknown `agent`: `POST /responses` and `POST
/// /agents/responses` keep the older `{"error": "…"}` shape, as the spec does; every other
/// route answers the standard envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AgentErrors {
    Legacy,
    Standard,
}

impl AgentErrors {
    fn invalid(self, message: &'static str) -> ClientError {
        match self {
            Self::Legacy => ClientError::LegacyAgentRequired(message),
            Self::Standard => agentplane_domain::ValidationError::new("agent", message).into(),
        }
    }

    fn not_found(self, text: &str) -> ClientError {
        match self {
            Self::Legacy => ClientError::LegacyAgentNotFound(text.to_owned()),
            Self::Standard => ClientError::AgentNotFound,
        }
    }
}

/// `agent`: an agent of the caller's project, with the project's tenant and whether it has
/// webhook endpoints (one read of all three).
async fn load_agent(
    app: &App,
    auth: &ProjectAuth,
    value: Option<&Value>,
    errors: AgentErrors,
) -> Result<TurnAgent, ClientError> {
    let text = match value {
        Some(Value::String(s)) => s,
        None | Some(Value::Null) => return Err(errors.invalid("`agent` is required")),
        Some(_) => return Err(errors.invalid("`agent` must be an agent id")),
    };
    let not_found = || errors.not_found(text);
    let id: AgentId = text.parse().map_err(|_| not_found())?;
    match app.engine().turn_agent(&auth.project_id, &id).await {
        Ok(found) => Ok(found),
        Err(Refused::AgentNotFound) => Err(not_found()),
        Err(err) => Err(err.into()),
    }
}

/// The message's text with its text files appended, and its images.
async fn with_files(
    app: &App,
    auth: &ProjectAuth,
    session: &Session,
    text: String,
    files: &[FileRef],
    model: &str,
) -> Result<(String, Images), ClientError> {
    if files.is_empty() {
        return Ok((text, Images::default()));
    }
    let resolved =
        crate::client::files::input::resolve(app, &auth.project_id, &session.id, files, model).await?;
    Ok((format!("{text}{}", resolved.text), resolved.images))
}

fn metadata(body: &Map<String, Value>) -> Result<Metadata, ClientError> {
    Ok(body.get("metadata").map(|v| Metadata::from_json("metadata", v)).transpose()?.unwrap_or_default())
}

/// The session a turn runs in, with what the turn needs of it (one read of the session and its
/// transcript; a new session has neither events nor a transcript).
async fn session_for(
    app: &App,
    auth: &ProjectAuth,
    target: Option<SessionId>,
    agent: AgentId,
    metadata: &Metadata,
) -> Result<(Session, TurnContext), ClientError> {
    match target {
        None => {
            let id = SessionId::from_random(edge::random()?);
            let new =
                NewSession { agent_id: Some(agent), metadata: metadata.clone(), ..NewSession::default() };
            let session = new.into_session(id, auth.project_id, edge::now());
            app.store.sessions().create(&session).await?;
            Ok((session, TurnContext::default()))
        }
        Some(id) => Ok(app.engine().session_for_turn(&auth.project_id, &id).await?),
    }
}

/// `background` and `callback_url` are valid, and a background turn is refused before anything
/// is written (a session included) when the agent has background runs off.
fn refuse_background_if_off(
    body: &Map<String, Value>,
    agent: &agentplane_domain::agent::Agent,
) -> Result<(), ClientError> {
    callback_url(body)?;
    if background(body)? && !agent.execution.background_enabled {
        return Err(ClientError::BackgroundNotEnabled);
    }
    Ok(())
}

/// How a turn route goes on after validation: held while the turn runs, streamed, or queued
/// as a background run (202 with the `agent_run`).
#[allow(clippy::too_many_arguments)]
async fn run_or_queue(
    app: &App,
    auth: &ProjectAuth,
    body: &Map<String, Value>,
    admitted: &Admitted,
    (session, context): (&Session, TurnContext),
    (input, images): (String, Images),
    metadata: &Metadata,
    dialect: &Dialect,
    replay: Option<agentplane_engine::Replay>,
) -> Result<Response, ClientError> {
    let tenant = app.engine().admit_spend(admitted.tenant, edge::now()).await?;
    if background(body)? {
        if replay.is_some() {
            return Err(agentplane_domain::ValidationError::new(
                "background",
                "a replayed conversation runs in the call: `background` is not taken with it",
            )
            .into());
        }
        if dialect.stream {
            return Err(agentplane_domain::ValidationError::new(
                "stream",
                "a background turn is not streamed: follow its session's event stream",
            )
            .into());
        }
        let config = &admitted.config;
        let budget = SessionBudget::effective(session.budget, &admitted.agent.execution);
        if budget.is_some() && app.prices.price(&config.model).is_none() {
            return Err(ClientError::ModelNotPriced { model: config.model.clone() });
        }
        let queued = crate::client::runs::handlers::Queued {
            agent: &admitted.agent,
            channel: admitted.channel,
            version: admitted.version,
            session,
            input,
            image_files: images.files,
            callback_url: callback_url(body)?,
        };
        return Ok(crate::client::runs::queue(app, auth.project_id, queued).await?.into_response());
    }
    let given = TurnInput { input, images: images.urls, tenant, replay, ..TurnInput::default() };
    run(app, admitted, (session, context), given, metadata, dialect).await
}

/// What a Response shows besides the turn's outcome.
fn rendered<'a>(
    session: &Session,
    admitted: &'a Admitted,
    metadata: &'a Metadata,
    dialect: &'a Dialect,
    output: Vec<super::output::OutputItem>,
    created_at: i64,
) -> Rendered<'a> {
    Rendered {
        session_id: session.id,
        output,
        instructions: dialect.instructions.as_deref(),
        tools: &dialect.tools,
        agent_id: admitted.agent.id.to_string(),
        version: admitted.version,
        model: &admitted.config.model,
        metadata,
        created_at,
    }
}

/// Runs the admitted turn and waits for it (up to the agent's synchronous timeout, within the
/// function's), or streams it, then names a new session after its first turn.
pub(crate) async fn run(
    app: &App,
    admitted: &Admitted,
    (session, context): (&Session, TurnContext),
    given: TurnInput,
    metadata: &Metadata,
    dialect: &Dialect,
) -> Result<Response, ClientError> {
    let timeout =
        app.sync_ceiling.min(std::time::Duration::from_millis(admitted.agent.execution.sync_timeout_ms));
    // The session's first turn: nothing in its log before it (a replayed conversation is not
    // named: its caller keeps the conversation, and replays it with every request).
    let first = context.last_event_seq == 0 && context.transcript.is_none() && given.replay.is_none();
    let input = given.input.clone();
    let request = admitted.request(session, context, given, tokio::time::Instant::now() + timeout);
    let work = Work::Start { request: Box::new(request), first, input };
    Box::pin(held_or_streamed(app, admitted, session, metadata, dialect, work)).await
}

/// What a turn route asks of the engine: a new turn, or the answers that carry a paused one on.
pub(crate) enum Work {
    Start { request: Box<agentplane_engine::TurnRequest>, first: bool, input: String },
    Answer { key: agentplane_domain::ids::ApiKeyId, turn_id: String, answers: Vec<(Action, Answer)> },
}

impl Work {
    /// Does it with `engine` (a watched one), then names a new session after its first turn.
    pub(crate) async fn perform(
        self,
        app: &App,
        engine: &crate::app::Engine,
        session: &Session,
    ) -> Result<agentplane_engine::TurnOutcome, ClientError> {
        match self {
            Self::Start { request, first, input } => {
                let outcome = engine
                    .run_held(*request)
                    .await
                    .ok_or_else(|| ClientError::internal("the turn task failed"))?
                    .map_err(|err| ClientError::turn(err, session.id.to_string()))?;
                let answer = outcome.output_text.as_deref();
                let turn = FirstTurn { model: app.title_model.as_deref(), first, input: &input, answer };
                engine.title_after(session, turn).await;
                Ok(outcome)
            }
            Self::Answer { key, turn_id, answers } => {
                let continued = agentplane_engine::actions::answer_turn(
                    engine,
                    session.project_id,
                    &key,
                    session.id,
                    &turn_id,
                    answers,
                )
                .await?;
                match continued {
                    Some(Continued::Ran(outcome)) => Ok(*outcome),
                    Some(Continued::Run(_)) | Some(Continued::Stale) => {
                        Err(ClientError::SessionBusy { session_id: Some(session.id.to_string()) })
                    }
                    None => {
                        let pending = app.store.actions().pending(&session.project_id, &session.id).await?;
                        Err(ClientError::ActionsPending {
                            pending_action_ids: pending.iter().map(|a| a.id.to_string()).collect(),
                        })
                    }
                }
            }
        }
    }
}

/// Does `work` and answers the Response when it ends, or streams it as it goes (`stream`).
async fn held_or_streamed(
    app: &App,
    admitted: &Admitted,
    session: &Session,
    metadata: &Metadata,
    dialect: &Dialect,
    work: Work,
) -> Result<Response, ClientError> {
    let created_at = edge::now().unix_seconds();
    if dialect.stream {
        let shown = super::stream::Shown {
            admitted: admitted.clone(),
            metadata: metadata.clone(),
            dialect: dialect.clone(),
            created_at,
        };
        return Ok(super::stream::stream(app.clone(), session.clone(), shown, work));
    }
    let (watch, mut committed) = tokio::sync::mpsc::unbounded_channel();
    let engine = app.engine().watched(watch, false);
    let outcome = Box::pin(work.perform(app, &engine, session)).await?;
    drop(engine);
    let mut items = Items::new(session.id);
    while let Ok(watched) = committed.try_recv() {
        if let Watched::Committed(event) = watched {
            items.push(&event);
        }
    }
    let shown = rendered(session, admitted, metadata, dialect, items.into_items(), created_at);
    Ok(Json(ResponseBody::new(shown, &outcome)).into_response())
}

/// The answers `function_call_output` items give the calls the session's paused turn waits
/// for (each `call_id` an action's id); a new message may not come with them.
async fn call_answers(
    app: &App,
    auth: &ProjectAuth,
    session: &SessionId,
    outputs: &[CallOutput],
    text: &str,
) -> Result<(String, Vec<(Action, Answer)>), ClientError> {
    if !text.trim().is_empty() {
        return Err(agentplane_domain::ValidationError::new(
            "input",
            "`function_call_output` items answer a paused turn: send a new message after it ends",
        )
        .into());
    }
    let pending = app.store.actions().pending(&auth.project_id, session).await?;
    if pending.is_empty() {
        // Not this project's session, or nothing waits.
        app.store.sessions().get(&auth.project_id, session).await?;
    }
    let mut answers: Vec<(Action, Answer)> = Vec::with_capacity(outputs.len());
    for output in outputs {
        let Some(action) = pending.iter().find(|a| a.id.to_string() == output.call_id) else {
            return Err(agentplane_domain::ValidationError::new(
                format!("{}.call_id", output.param),
                format!("no call of this session waits for `{}`", output.call_id),
            )
            .into());
        };
        let value = serde_json::from_str::<Value>(&output.output)
            .unwrap_or_else(|_| Value::String(output.output.clone()));
        let answer = match action.kind {
            agentplane_domain::action::ActionType::ClientTool => Answer::ClientTool { output: value },
            _ => {
                return Err(agentplane_domain::ValidationError::new(
                    format!("{}.call_id", output.param),
                    "this action is an approval or a question: answer it at /sessions/{id}/actions/{action_id}",
                )
                .into());
            }
        };
        answers.push((action.clone(), answer));
    }
    let turn_id = answers.first().map(|(a, _)| a.turn_id.clone()).unwrap_or_default();
    Ok((turn_id, answers))
}

#[allow(clippy::too_many_arguments)]
async fn turn_or_answers(
    app: &App,
    auth: &ProjectAuth,
    body: &Map<String, Value>,
    admitted: &Admitted,
    target: Option<SessionId>,
    loaded: Option<(Session, TurnContext)>,
    (text, files, extras): (String, Vec<FileRef>, InputExtras),
    metadata: Metadata,
    dialect: &Dialect,
) -> Result<Response, ClientError> {
    if target.is_none() && extras.history.is_some() {
        let (replay, text) = super::replay::read(body.get("input").unwrap_or(&Value::Null))?;
        let (session, context) = session_for(app, auth, None, admitted.agent.id, &metadata).await?;
        let input = (text, Images::default());
        return run_or_queue(
            app,
            auth,
            body,
            admitted,
            (&session, context),
            input,
            &metadata,
            dialect,
            Some(replay),
        )
        .await;
    }
    if !extras.outputs.is_empty() {
        let Some(id) = target else {
            return Err(agentplane_domain::ValidationError::new(
                extras.outputs[0].param.clone(),
                "a `function_call_output` answers a call of a paused turn: give `previous_response_id`",
            )
            .into());
        };
        if background(body)? {
            return Err(agentplane_domain::ValidationError::new(
                "background",
                "answers carry a paused turn on in the call: `background` is not taken with them",
            )
            .into());
        }
        let (turn_id, answers) = call_answers(app, auth, &id, &extras.outputs, &text).await?;
        let session = app.store.sessions().get(&auth.project_id, &id).await?;
        let metadata = session.metadata.clone();
        let work = Work::Answer { key: auth.key_id, turn_id, answers };
        return Box::pin(held_or_streamed(app, admitted, &session, &metadata, dialect, work)).await;
    }
    let (session, context) = match loaded {
        Some(loaded) => loaded,
        None => session_for(app, auth, target, admitted.agent.id, &metadata).await?,
    };
    let metadata = if target.is_some() { session.metadata.clone() } else { metadata };
    let input = with_files(app, auth, &session, text, &files, &admitted.config.model).await?;
    run_or_queue(app, auth, body, admitted, (&session, context), input, &metadata, dialect, None).await
}

async fn respond(
    app: App,
    auth: ProjectAuth,
    body: Map<String, Value>,
    channel: Channel,
) -> Result<Response, ClientError> {
    fields::check(&body, Route::Responses)?;
    // `agent`, else `model` names the agent.
    let named = match body.get("agent") {
        None | Some(Value::Null) => body.get("model"),
        given => given,
    };
    let found = load_agent(&app, &auth, named, AgentErrors::Legacy).await?;
    refuse_background_if_off(&body, &found.agent)?;
    let mut admitted = app.engine().admit(found, channel, None).await?;
    check_model(&body, &admitted)?;
    let input = input_items(body.get("input"), &admitted.config.attachments)?;
    let dialect = Dialect::read(&body, &input.2, &mut admitted)?;
    let target = target_session(&body, &input.2)?;
    if input.1.iter().any(|file| file.inline.is_none()) && target.is_none() {
        return Err(agentplane_domain::ValidationError::new(
            "session_id",
            "file parts name files of a session: give its `session_id`",
        )
        .into());
    }
    let metadata = metadata(&body)?;
    Box::pin(turn_or_answers(&app, &auth, &body, &admitted, target, None, input, metadata, &dialect)).await
}

/// Run a turn of an agent's draft.
///
/// The call is held while the turn runs (up to the agent's `sync_timeout_ms`).
#[utoipa::path(
    post,
    path = "/api/client/v1/responses",
    tag = "client",
    operation_id = "client-responses-create",
    request_body = CreateResponse,
    responses(
        (status = 200, description = "The turn ran; `status` says how it ended, or that it waits for actions (`requires_action`, with `required_action`). With `stream: true`, the Responses streaming events (`text/event-stream`).", content(
            (ResponseBody = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 202, description = "`background: true`: the turn is queued as a background run (`agent_run`, `queued`); read it at `GET /api/client/v1/runs/{id}`.", body = crate::client::runs::wire::RunBody),
        (status = 402, description = "The tenant's monthly spend limit is reached (`spend_limit_reached`, with `spent_usd` and `max_cost_usd`).", body = ErrorEnvelope),
        (status = 400, description = "The body is not a valid request (`param` names the field), or a session budget applies and the model has no price (`model_not_priced`); a missing `agent` answers `{\"error\": \"…\"}`.", body = ResponsesError),
        (status = 404, description = "`agent` names no agent of this project (`{\"error\": \"…\"}`), or `session_id` no session (`session_not_found`).", body = ResponsesError),
        (status = 409, description = "A turn is already running in the session (`session_busy`), its turn waits for actions (`actions_pending`, with `pending_action_ids`), or its turn is paused by its budget (`budget_paused`, with `spent_usd` and `max_cost_usd`).", body = ErrorEnvelope),
    ),
)]
pub async fn create_draft(
    State(app): State<App>,
    auth: ProjectAuth,
    JsonObject(body, _): JsonObject<ClientError>,
) -> Result<Response, ClientError> {
    respond(app, auth, body, Channel::Draft).await
}

/// Run a turn of an agent's newest published version.
///
/// The call is held while the turn runs (up to the agent's `sync_timeout_ms`).
#[utoipa::path(
    post,
    path = "/api/client/v1/agents/responses",
    tag = "client",
    operation_id = "client-agent-responses-create",
    request_body = CreateResponse,
    responses(
        (status = 200, description = "The turn ran; `status` says how it ended, or that it waits for actions (`requires_action`, with `required_action`). With `stream: true`, the Responses streaming events (`text/event-stream`).", content(
            (ResponseBody = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 202, description = "`background: true`: the turn is queued as a background run (`agent_run`, `queued`); read it at `GET /api/client/v1/runs/{id}`.", body = crate::client::runs::wire::RunBody),
        (status = 402, description = "The tenant's monthly spend limit is reached (`spend_limit_reached`, with `spent_usd` and `max_cost_usd`).", body = ErrorEnvelope),
        (status = 400, description = "The body is not a valid request (`param` names the field), or a session budget applies and the model has no price (`model_not_priced`); a missing `agent` answers `{\"error\": \"…\"}`.", body = ResponsesError),
        (status = 404, description = "`agent` names no agent of this project (`{\"error\": \"…\"}`), or `session_id` no session (`session_not_found`).", body = ResponsesError),
        (status = 409, description = "The agent has no published version (`agent_not_published`), a turn is running in the session (`session_busy`), its turn waits for actions (`actions_pending`, with `pending_action_ids`), or its turn is paused by its budget (`budget_paused`, with `spent_usd` and `max_cost_usd`).", body = ErrorEnvelope),
    ),
)]
pub async fn create_published(
    State(app): State<App>,
    auth: ProjectAuth,
    JsonObject(body, _): JsonObject<ClientError>,
) -> Result<Response, ClientError> {
    respond(app, auth, body, Channel::Published).await
}

/// Send a message in an existing session.
///
/// The turn runs with the agent and channel the session last ran (or `agent` from the body).
#[utoipa::path(
    post,
    path = "/api/client/v1/sessions/{session_id}/messages",
    tag = "client",
    operation_id = "client-session-messages-create",
    params(("session_id" = String, Path, description = "The session's id.")),
    request_body = CreateSessionMessage,
    responses(
        (status = 200, description = "The turn ran; `status` says how it ended, or that it waits for actions (`requires_action`, with `required_action`). With `stream: true`, the Responses streaming events (`text/event-stream`).", content(
            (ResponseBody = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 202, description = "`background: true`: the turn is queued as a background run (`agent_run`, `queued`); read it at `GET /api/client/v1/runs/{id}`.", body = crate::client::runs::wire::RunBody),
        (status = 402, description = "The tenant's monthly spend limit is reached (`spend_limit_reached`, with `spent_usd` and `max_cost_usd`).", body = ErrorEnvelope),
        (status = 400, description = "The body is not a valid request (`param` names the field), or a session budget applies and the model has no price (`model_not_priced`).", body = ErrorEnvelope),
        (status = 404, description = "No such session (`session_not_found`), or `agent` names no agent of this project (`agent_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "A turn is already running in the session (`session_busy`), its turn waits for actions (`actions_pending`, with `pending_action_ids`) or its budget (`budget_paused`, with `spent_usd` and `max_cost_usd`), or the agent has no published version (`agent_not_published`).", body = ErrorEnvelope),
    ),
)]
pub async fn session_message(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    JsonObject(body, _): JsonObject<ClientError>,
) -> Result<Response, ClientError> {
    fields::check(&body, Route::Messages)?;
    let id: SessionId = id.parse().map_err(|_| ClientError::SessionNotFound)?;
    // A message reads the session and its transcript at once (and is refused while a turn
    // runs or waits); answers to a paused turn's calls read the session alone.
    let (session, loaded) = match answers_calls(body.get("input")) {
        false => {
            let (session, context) = app.engine().session_for_turn(&auth.project_id, &id).await?;
            (session.clone(), Some((session, context)))
        }
        true => (app.store.sessions().get(&auth.project_id, &id).await?, None),
    };
    let found = match (body.get("agent"), session.agent_id) {
        (Some(value), _) => load_agent(&app, &auth, Some(value), AgentErrors::Standard).await?,
        (None, Some(agent_id)) => app.engine().turn_agent(&auth.project_id, &agent_id).await?,
        (None, None) => {
            return Err(agentplane_domain::ValidationError::new(
                "agent",
                "the session has no agent yet; give `agent`",
            )
            .into());
        }
    };
    refuse_background_if_off(&body, &found.agent)?;
    let channel = session.agent_channel.unwrap_or(Channel::Draft);
    let mut admitted = app.engine().admit(found, channel, None).await?;
    check_model(&body, &admitted)?;
    let input = input_items(body.get("input"), &admitted.config.attachments)?;
    let dialect = Dialect::read(&body, &input.2, &mut admitted)?;
    let metadata = session.metadata.clone();
    Box::pin(turn_or_answers(&app, &auth, &body, &admitted, Some(id), loaded, input, metadata, &dialect))
        .await
}
