use agentplane_domain::SessionId;
use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_domain::session::{NewSession, SessionPatch};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;

use super::runtime;
use super::wire::{CreateSession, SessionBody, SessionDeleted, UpdateSession};
use crate::body::Wire;
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::envelope::ErrorEnvelope;
use crate::list::{List, PageParams};
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
    // The agent must be one of the caller's project: another project's is as missing (404).
    if let Some(agent_id) = &new.agent_id {
        app.store.agents().get(&auth.project_id, agent_id).await.or_not_found(ClientError::AgentNotFound)?;
    }
    let id = SessionId::from_random(edge::random()?);
    let mut session = new.into_session(id, auth.project_id, edge::now());
    runtime::prepare(&mut session)?;
    app.store.sessions().create(&session).await?;
    runtime::allocate(&app, &session).await?;
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
    let budget_changed = patch.budget.is_some();
    let now = edge::now();
    if budget_changed {
        // The outbox of a budget raise, written before it: should the continuation below not be
        // sent, the retention sweep finds the note and carries a paused turn on (the note of a
        // session that did not pause, or is running, is dropped or kept harmlessly).
        let note = agentplane_store::dynamo::tenant_pauses::TenantPause {
            tenant_key: agentplane_domain::tenant::TenantKey::Project(auth.project_id).key(),
            project_id: auth.project_id,
            session_id: id,
        };
        app.store.tenant_pauses().note(&note).await?;
    }
    let session = app
        .store
        .sessions()
        .update(&auth.project_id, &id, patch, now)
        .await
        .or_not_found(ClientError::SessionNotFound)?;
    record_dead_turn(&app, &auth.project_id, &session, now).await?;
    if budget_changed && session.runtime_status == agentplane_domain::session::RuntimeStatus::BudgetPaused {
        // The agent's budget applies when the session's own was removed.
        let agent_budget = agentplane_engine::tenant_resume::agent_budget_of(&app.store, &session).await?;
        if let Err(err) =
            agentplane_engine::continuation::carry_on_after_budget(&app.store, &session, agent_budget).await
        {
            tracing::warn!(error = %err, session = %id, "a budget raise's continuation was not sent; the sweep sends it");
        }
    }
    Ok(Json(SessionBody::from(&session.settled(now))))
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
    runtime::release(&app, &auth.project_id, &id).await?;
    // Its pending actions end first (`cancelled`): a retried DELETE after a failure here
    // cancels the rest, and none is left for the sweep to expire and carry on.
    let now = edge::now();
    app.store.actions().cancel_all_pending(&auth.project_id, &id, now).await?;
    app.store
        .sessions()
        .delete(&auth.project_id, &id, now)
        .await
        .or_not_found(ClientError::SessionNotFound)?;
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
    let now = edge::now();
    let sessions = app.store.sessions();
    match sessions.cancel_turn(&auth.project_id, &id, now).await {
        Ok(session) => Ok(Json(SessionBody::from(&session.settled(now)))),
        Err(agentplane_store::StoreError::Conflict) => {
            // No live turn to cancel, or no session at all: the session tells which.
            let session =
                sessions.get(&auth.project_id, &id).await.or_not_found(ClientError::SessionNotFound)?;
            let paused = matches!(
                session.runtime_status,
                agentplane_domain::session::RuntimeStatus::RequiresAction
                    | agentplane_domain::session::RuntimeStatus::BudgetPaused
            );
            if paused
                && let Some(turn_id) = &session.current_turn_id
                && app
                    .engine()
                    .cancel_paused(&auth.project_id, &id, turn_id, session.last_event_seq)
                    .await?
                    .is_some()
            {
                let session =
                    sessions.get(&auth.project_id, &id).await.or_not_found(ClientError::SessionNotFound)?;
                return Ok(Json(SessionBody::from(&session)));
            }
            record_dead_turn(&app, &auth.project_id, &session, now).await?;
            Err(ClientError::NothingToCancel { runtime_status: session.settled(now).runtime_status })
        }
        Err(agentplane_store::StoreError::NotFound) => Err(ClientError::SessionNotFound),
        Err(err) => Err(ClientError::Storage(err)),
    }
}

/// A write records what reads already show: a turn whose holder died past its hold ended in
/// error.
async fn record_dead_turn(
    app: &App,
    project: &agentplane_domain::ProjectId,
    session: &agentplane_domain::session::Session,
    now: agentplane_domain::Timestamp,
) -> Result<(), ClientError> {
    if session.holder_died(now) {
        app.store.sessions().settle_dead_turn(project, &session.id, now).await?;
    }
    Ok(())
}
