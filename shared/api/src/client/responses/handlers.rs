use agentplane_domain::SessionId;
use agentplane_domain::agent::Channel;
use agentplane_domain::ids::AgentId;
use agentplane_domain::metadata::Metadata;
use agentplane_domain::session::{NewSession, Session, SessionBudget};
use agentplane_engine::TurnContext;
use agentplane_engine::admission::{Admitted, Refused, TurnInput};
use agentplane_engine::titles::FirstTurn;
use agentplane_store::dynamo::agents::TurnAgent;
use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use super::output::Items;
use super::validation::{background, callback_url, input_with_files};
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
    files: &[crate::client::responses::validation::FileRef],
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
    body: &Map<String, Value>,
    agent: AgentId,
    metadata: &Metadata,
) -> Result<(Session, TurnContext), ClientError> {
    match body.get("session_id") {
        None | Some(Value::Null) => {
            let id = SessionId::from_random(edge::random()?);
            let new =
                NewSession { agent_id: Some(agent), metadata: metadata.clone(), ..NewSession::default() };
            let session = new.into_session(id, auth.project_id, edge::now());
            app.store.sessions().create(&session).await?;
            Ok((session, TurnContext::default()))
        }
        Some(Value::String(text)) => {
            let id: SessionId = text.parse().map_err(|_| ClientError::SessionNotFound)?;
            Ok(app.engine().session_for_turn(&auth.project_id, &id).await?)
        }
        Some(_) => {
            Err(agentplane_domain::ValidationError::new("session_id", "`session_id` must be a string").into())
        }
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

/// How a turn route goes on after validation: held while the turn runs, or queued as a
/// background run (202 with the `agent_run`).
async fn run_or_queue(
    app: &App,
    auth: &ProjectAuth,
    body: &Map<String, Value>,
    admitted: &Admitted,
    (session, context): (&Session, TurnContext),
    (input, images): (String, Images),
    metadata: &Metadata,
) -> Result<Response, ClientError> {
    let tenant = app.engine().admit_spend(admitted.tenant, edge::now()).await?;
    if background(body)? {
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
    let given = TurnInput { input, images: images.urls, tenant, ..TurnInput::default() };
    Ok(run(app, admitted, (session, context), given, metadata).await?.into_response())
}

/// Runs the admitted turn and waits for it (up to the agent's synchronous timeout, within the
/// function's), then names a new session after its first turn.
pub(crate) async fn run(
    app: &App,
    admitted: &Admitted,
    (session, context): (&Session, TurnContext),
    given: TurnInput,
    metadata: &Metadata,
) -> Result<Json<ResponseBody>, ClientError> {
    let timeout =
        app.sync_ceiling.min(std::time::Duration::from_millis(admitted.agent.execution.sync_timeout_ms));
    // The session's first turn: nothing in its log before it.
    let first = context.last_event_seq == 0 && context.transcript.is_none();
    let input = given.input.clone();
    let request = admitted.request(session, context, given, tokio::time::Instant::now() + timeout);
    let created_at = edge::now().unix_seconds();
    let (watch, mut committed) = tokio::sync::mpsc::unbounded_channel();
    let engine = app.engine().watched(watch);
    let outcome = engine
        .run_held(request)
        .await
        .ok_or_else(|| ClientError::internal("the turn task failed"))?
        .map_err(|err| ClientError::turn(err, session.id.to_string()))?;
    drop(engine);
    let mut items = Items::new(session.id);
    while let Ok(event) = committed.try_recv() {
        items.push(&event);
    }
    let answer = outcome.output_text.as_deref();
    let turn = FirstTurn { model: app.title_model.as_deref(), first, input: &input, answer };
    app.engine().title_after(session, turn).await;
    let rendered = Rendered {
        session_id: session.id,
        output: items.into_items(),
        instructions: None,
        tools: &[],
        agent_id: admitted.agent.id.to_string(),
        version: admitted.version,
        model: &admitted.config.model,
        metadata,
        created_at,
    };
    Ok(Json(ResponseBody::new(rendered, &outcome)))
}

async fn respond(
    app: App,
    auth: ProjectAuth,
    body: Map<String, Value>,
    channel: Channel,
) -> Result<Response, ClientError> {
    let found = load_agent(&app, &auth, body.get("agent"), AgentErrors::Legacy).await?;
    refuse_background_if_off(&body, &found.agent)?;
    let admitted = app.engine().admit(found, channel, None).await?;
    let (text, files) = input_with_files(body.get("input"), &admitted.config.attachments)?;
    if !files.is_empty() && matches!(body.get("session_id"), None | Some(Value::Null)) {
        return Err(agentplane_domain::ValidationError::new(
            "session_id",
            "file parts name files of a session: give its `session_id`",
        )
        .into());
    }
    let metadata = metadata(&body)?;
    let (session, context) = session_for(&app, &auth, &body, admitted.agent.id, &metadata).await?;
    let input = with_files(&app, &auth, &session, text, &files, &admitted.config.model).await?;
    run_or_queue(&app, &auth, &body, &admitted, (&session, context), input, &metadata).await
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
        (status = 200, description = "The turn ran; `status` says how it ended, or that it waits for actions (`requires_action`, with `required_action`).", body = ResponseBody),
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
        (status = 200, description = "The turn ran; `status` says how it ended, or that it waits for actions (`requires_action`, with `required_action`).", body = ResponseBody),
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
        (status = 200, description = "The turn ran; `status` says how it ended, or that it waits for actions (`requires_action`, with `required_action`).", body = ResponseBody),
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
    let id: SessionId = id.parse().map_err(|_| ClientError::SessionNotFound)?;
    let (session, context) = app.engine().session_for_turn(&auth.project_id, &id).await?;
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
    let admitted = app.engine().admit(found, channel, None).await?;
    let (text, files) = input_with_files(body.get("input"), &admitted.config.attachments)?;
    let input = with_files(&app, &auth, &session, text, &files, &admitted.config.model).await?;
    let metadata = session.metadata.clone();
    run_or_queue(&app, &auth, &body, &admitted, (&session, context), input, &metadata).await
}
