use agentplane_domain::SessionId;
use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_domain::session::{NewSession, SessionPatch};
use agentplane_engine::sessions;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;

use super::wire::{CreateSession, SessionBody, SessionDeleted, UpdateSession};
use crate::body::Wire;
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::envelope::ErrorEnvelope;
use crate::list::{List, PageParams};
use crate::sandbox::managed;
use crate::{App, edge};

/// A malformed id is indistinguishable from a missing session.
fn session_id(text: &str) -> Result<SessionId, ClientError> {
    text.parse().map_err(|_| ClientError::SessionNotFound)
}

/// Create a session.
#[utoipa::path(
    post,
    path = "/api/client/v1/sessions",
    tag = "client",
    operation_id = "client-sessions-create",
    request_body(content = CreateSession, description = "Every field is optional; an empty body creates an empty session."),
    responses(
        (status = 201, description = "The new session.", body = SessionBody),
        (status = 400, description = "The body is not a valid request (`param` names the field).", body = ErrorEnvelope),
        (status = 404, description = "`agent_id` names no agent of this project.", body = ErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    auth: ProjectAuth,
    Wire(body, _): Wire<CreateSession, ClientError>,
) -> Result<(StatusCode, Json<SessionBody>), ClientError> {
    let new = NewSession::try_from(body)?;
    let session = sessions::create(&app.store, &managed::nodes(&app), auth.project_id, new).await?;
    Ok((StatusCode::CREATED, Json(SessionBody::from(&session))))
}

/// List the project's sessions, newest first.
#[utoipa::path(
    get,
    path = "/api/client/v1/sessions",
    tag = "client",
    operation_id = "client-sessions-list",
    params(PageParams),
    responses(
        (status = 200, description = "A page of sessions.", body = List<SessionBody>),
        (status = 400, description = "A page parameter is invalid.", body = ErrorEnvelope),
        (status = 404, description = "`after` names no session of this project (`cursor_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: ProjectAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<List<SessionBody>>, ClientError> {
    let page = PageRequest::from_query(&Query::parse(raw.as_deref()))?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<SessionId>().map_err(|_| ClientError::CursorNotFound)?),
        None => None,
    };
    let found = app
        .store
        .sessions()
        .list(&auth.project_id, &page, after.as_ref())
        .await
        .or_not_found(ClientError::CursorNotFound)?;
    let now = edge::now();
    let render =
        |session: &agentplane_domain::session::Session| SessionBody::from(&session.clone().settled(now));
    Ok(Json(List::of(&found, render, |s| s.id.to_string())))
}

/// Retrieve a session.
#[utoipa::path(
    get,
    path = "/api/client/v1/sessions/{session_id}",
    tag = "client",
    operation_id = "client-sessions-get",
    params(("session_id" = String, Path, description = "The session's id.")),
    responses(
        (status = 200, description = "The session.", body = SessionBody),
        (status = 404, description = "No such session in this project (`session_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<SessionBody>, ClientError> {
    let id = session_id(&id)?;
    let session =
        app.store.sessions().get(&auth.project_id, &id).await.or_not_found(ClientError::SessionNotFound)?;
    Ok(Json(SessionBody::from(&session.settled(edge::now()))))
}

/// Change a session's title or metadata.
#[utoipa::path(
    patch,
    path = "/api/client/v1/sessions/{session_id}",
    tag = "client",
    operation_id = "client-sessions-update",
    params(("session_id" = String, Path, description = "The session's id.")),
    request_body = UpdateSession,
    responses(
        (status = 200, description = "The session as changed.", body = SessionBody),
        (status = 400, description = "The body is not a valid change (`param` names the field).", body = ErrorEnvelope),
        (status = 404, description = "No such session in this project (`session_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn update(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    Wire(body, _): Wire<UpdateSession, ClientError>,
) -> Result<Json<SessionBody>, ClientError> {
    let id = session_id(&id)?;
    let patch = SessionPatch::try_from(body)?;
    let session = sessions::update(&app.store, auth.project_id, id, patch).await?;
    Ok(Json(SessionBody::from(&session)))
}

/// Delete a session (and stop its managed compute, if any). Its pending actions end as
/// `cancelled`: nobody can answer them any more.
#[utoipa::path(
    delete,
    path = "/api/client/v1/sessions/{session_id}",
    tag = "client",
    operation_id = "client-sessions-delete",
    params(("session_id" = String, Path, description = "The session's id.")),
    responses(
        (status = 200, description = "The session is deleted.", body = SessionDeleted),
        (status = 404, description = "No such session in this project (`session_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn delete(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<SessionDeleted>, ClientError> {
    let id = session_id(&id)?;
    sessions::delete(&app.store, &managed::nodes(&app), auth.project_id, id).await?;
    Ok(Json(SessionDeleted { id, object: "session.deleted", deleted: true }))
}

/// Cancel the turn running in a session.
///
/// The cancel is recorded on the session at once and answered with the session (still
/// `running`); the turn, wherever it runs, sees it at its next step: it makes no further model
/// call, writes `turn.ended` with `stop_reason: cancelled` and releases the session (`idle`,
/// `stop_reason: cancelled`); the Responses call that started it answers `status: incomplete`.
/// Cancelling again before the turn stops changes nothing; a turn that ends on its own first
/// keeps its own ending. A turn paused for actions (`requires_action`) ends at once: its pending
/// actions become `cancelled`, `turn.ended` says `cancelled`, and the session answered is `idle`.
#[utoipa::path(
    post,
    path = "/api/client/v1/sessions/{session_id}/cancel",
    tag = "client",
    operation_id = "client-sessions-cancel",
    params(("session_id" = String, Path, description = "The session's id.")),
    responses(
        (status = 200, description = "The cancel is recorded; the session as it is now (a running turn stops at its next step; a paused one has ended).", body = SessionBody),
        (status = 404, description = "No such session in this project (`session_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "No turn is running in the session (`nothing_to_cancel`, with its `runtime_status`).", body = ErrorEnvelope),
    ),
)]
pub async fn cancel(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<SessionBody>, ClientError> {
    let id = session_id(&id)?;
    let session = sessions::cancel(app.engine(), auth.project_id, id).await?;
    Ok(Json(SessionBody::from(&session)))
}
