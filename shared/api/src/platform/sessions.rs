//! `/v1/environments/{environmentId}/sessions`: create, list, get. A session here is the
//! client API's session item with its `environment_id` set.

use agentplane_domain::SessionId;
use agentplane_domain::metadata::Metadata;
use agentplane_domain::page::PageRequest;
use agentplane_domain::session::{EnvironmentMode, NewSession, Session, Title};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;
use serde_json::Value;

use super::auth::PlatformAuth;
use super::environments::environment_id;
use super::error::{Found, PlatformError, PlatformErrorEnvelope};
use super::wire::{CreateSession, Data, ListPage, PAGE_PARAMS, SessionBody, Strict, only_query};
use crate::list::PageParams;
use crate::{App, edge};

/// The session `session` of environment `environment` in the caller's project; a session of
/// another environment or project, or a malformed id, is a 404 (the environment's own first).
pub async fn load(
    app: &App,
    auth: &PlatformAuth,
    environment: &str,
    session: &str,
) -> Result<Session, PlatformError> {
    let environment = super::environments::load(app, auth, environment).await?;
    let id: SessionId = session.parse().map_err(|_| PlatformError::SessionNotFound)?;
    let found = app
        .store
        .sessions()
        .get(&auth.0.project_id, &id)
        .await
        .or_not_found(PlatformError::SessionNotFound)?;
    if found.environment_id != Some(environment.id) {
        return Err(PlatformError::SessionNotFound);
    }
    Ok(found.settled(edge::now()))
}

/// Create a session in an environment.
#[utoipa::path(
    post,
    path = "/v1/environments/{environmentId}/sessions",
    tag = "platform",
    operation_id = "platform-sessions-create",
    params(("environmentId" = String, Path, min_length = 1, description = "The environment's id.")),
    request_body(content = CreateSession, description = "Every field is optional; unknown fields are refused."),
    responses(
        (status = 201, description = "The new session.", body = Data<SessionBody>),
        (status = 400, description = "Invalid request (`details.param` names the field).", body = PlatformErrorEnvelope),
        (status = 404, description = "No such environment in this project (`environment_not_found`).", body = PlatformErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    auth: PlatformAuth,
    Path(environment): Path<String>,
    Strict(body): Strict<CreateSession>,
) -> Result<(StatusCode, Json<Data<SessionBody>>), PlatformError> {
    let environment = environment_id(&environment)?;
    let title = body.title.map(|t| Title::from_json("title", &Value::String(t))).transpose()?.flatten();
    let metadata = match &body.metadata {
        None | Some(Value::Null) => Metadata::default(),
        Some(value) => Metadata::from_json("metadata", value)?,
    };
    // The environment's workspace is a sandbox on a node of this deployment, not a managed
    // allocation with sampled history: Core reports the session self_hosted (see the README).
    let new = NewSession {
        title,
        metadata,
        environment_mode: EnvironmentMode::SelfHosted,
        ..NewSession::default()
    };
    let mut session =
        new.into_session(SessionId::from_random(edge::random()?), auth.0.project_id, edge::now());
    session.environment_id = Some(environment);
    app.store
        .environments()
        .create_session(&session)
        .await
        .or_not_found(PlatformError::EnvironmentNotFound)?;
    Ok((StatusCode::CREATED, Data::of(SessionBody::from(&session))))
}

/// List an environment's sessions, newest first.
#[utoipa::path(
    get,
    path = "/v1/environments/{environmentId}/sessions",
    tag = "platform",
    operation_id = "platform-sessions-list",
    params(("environmentId" = String, Path, min_length = 1, description = "The environment's id."), PageParams),
    responses(
        (status = 200, description = "A page of sessions.", body = ListPage<SessionBody>),
        (status = 400, description = "A page parameter is invalid, or the query names another (`details.param` names it).", body = PlatformErrorEnvelope),
        (status = 404, description = "No such environment (`environment_not_found`), or `after` names no session of it (`cursor_not_found`).", body = PlatformErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: PlatformAuth,
    Path(environment): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<ListPage<SessionBody>>, PlatformError> {
    let page = PageRequest::from_query(&only_query(raw.as_deref(), PAGE_PARAMS)?)?;
    let environment = super::environments::load(&app, &auth, &environment).await?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<SessionId>().map_err(|_| PlatformError::CursorNotFound)?),
        None => None,
    };
    let found = app
        .store
        .environments()
        .list_sessions(&auth.0.project_id, &environment.id, &page, after.as_ref())
        .await
        .or_not_found(PlatformError::CursorNotFound)?;
    let now = edge::now();
    Ok(ListPage::of(&found, |s| SessionBody::from(&s.clone().settled(now)), |s| s.id.to_string()))
}

/// Retrieve a session of an environment.
#[utoipa::path(
    get,
    path = "/v1/environments/{environmentId}/sessions/{sessionId}",
    tag = "platform",
    operation_id = "platform-sessions-get",
    params(
        ("environmentId" = String, Path, min_length = 1, description = "The environment's id."),
        ("sessionId" = String, Path, min_length = 1, description = "The session's id."),
    ),
    responses(
        (status = 200, description = "The session.", body = Data<SessionBody>),
        (status = 400, description = "Invalid request: a query parameter (this route takes none; `details.param` names it).", body = PlatformErrorEnvelope),
        (status = 404, description = "No such environment or session (`environment_not_found`, `session_not_found`).", body = PlatformErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: PlatformAuth,
    Path((environment, session)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Data<SessionBody>>, PlatformError> {
    only_query(raw.as_deref(), &[])?;
    let session = load(&app, &auth, &environment, &session).await?;
    Ok(Data::of(SessionBody::from(&session)))
}
