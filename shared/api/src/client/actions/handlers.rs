use agentplane_domain::action::{ActionId, ActionStatus, AnswerFields};
use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_domain::{ProjectId, SessionId};
use agentplane_engine::actions;
use axum::Json;
use axum::extract::{Path, RawQuery, State};

use super::wire::{ActionAnswer, ActionBody, ActionsParams};
use crate::App;
use crate::body::Wire;
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::envelope::ErrorEnvelope;
use crate::list::{List, PageParams};

/// The live session of the caller's project named by the path; a malformed id, another
/// project's or a deleted session is `session_not_found`.
async fn session(app: &App, project: &ProjectId, text: &str) -> Result<SessionId, ClientError> {
    let id: SessionId = text.parse().map_err(|_| ClientError::SessionNotFound)?;
    app.store.sessions().get(project, &id).await.or_not_found(ClientError::SessionNotFound)?;
    Ok(id)
}

/// A malformed action id is indistinguishable from a missing action.
fn action_id(text: &str) -> Result<ActionId, ClientError> {
    text.parse().map_err(|_| ClientError::ActionNotFound)
}

/// List a session's actions, newest first.
#[utoipa::path(
    get,
    path = "/api/client/v1/sessions/{session_id}/actions",
    tag = "client",
    operation_id = "client-session-actions-list",
    params(("session_id" = String, Path, description = "The session's id."), ActionsParams, PageParams),
    responses(
        (status = 200, description = "A page of the session's actions.", body = List<ActionBody>),
        (status = 400, description = "`status` or a page parameter is invalid (`param` names it).", body = ErrorEnvelope),
        (status = 404, description = "No such session in this project (`session_not_found`), or `after` names no action of it (`cursor_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(session_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<List<ActionBody>>, ClientError> {
    let query = Query::parse(raw.as_deref());
    let page = PageRequest::from_query(&query)?;
    let status = query.single("status")?.map(|text| ActionStatus::from_query("status", text)).transpose()?;
    let session = session(&app, &auth.project_id, &session_id).await?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<ActionId>().map_err(|_| ClientError::CursorNotFound)?),
        None => None,
    };
    let found = app
        .store
        .actions()
        .list(&auth.project_id, &session, status, &page, after.as_ref())
        .await
        .or_not_found(ClientError::CursorNotFound)?;
    Ok(Json(List::of(&found, |a| ActionBody::from(a), |a| a.id.to_string())))
}

/// Retrieve an action of a session.
#[utoipa::path(
    get,
    path = "/api/client/v1/sessions/{session_id}/actions/{action_id}",
    tag = "client",
    operation_id = "client-session-actions-get",
    params(
        ("session_id" = String, Path, description = "The session's id."),
        ("action_id" = String, Path, description = "The action's id (`act_…`)."),
    ),
    responses(
        (status = 200, description = "The action.", body = ActionBody),
        (status = 404, description = "No such session in this project (`session_not_found`), or no such action in the session (`action_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: ProjectAuth,
    Path((session_id, id)): Path<(String, String)>,
) -> Result<Json<ActionBody>, ClientError> {
    let session = session(&app, &auth.project_id, &session_id).await?;
    let id = action_id(&id)?;
    let action = app
        .store
        .actions()
        .get(&auth.project_id, &session, &id)
        .await
        .or_not_found(ClientError::ActionNotFound)?;
    Ok(Json(ActionBody::from(&action)))
}

/// Answer a pending action.
///
/// Whoever holds a key of the session's project may answer, once (when the agent's
/// `humanInTheLoop.answer_key_ids` names keys, only those: another is 403
/// `answer_not_permitted`, and the action stays as it was): the body takes the shape of
/// the action's `type` (approval `{decision: "approve" | "deny", reason?}`, question `{answers}`,
/// client tool `{output}`; `answers` and `output` are kept exactly as given). The first answer
/// wins; any later one — or one to an expired or cancelled action — is 409
/// `action_not_pending` with the action's `action_status`. An action past its `expires_at` is
/// expired even before the retention sweep records it: answering it records it and is 409 with
/// `expired`. When no action of the paused turn is pending any more, the turn carries on.
#[utoipa::path(
    post,
    path = "/api/client/v1/sessions/{session_id}/actions/{action_id}",
    tag = "client",
    operation_id = "client-session-actions-answer",
    params(
        ("session_id" = String, Path, description = "The session's id."),
        ("action_id" = String, Path, description = "The action's id (`act_…`)."),
    ),
    request_body(content = ActionAnswer, description = "The answer, of the shape of the action's `type`."),
    responses(
        (status = 200, description = "The action, resolved with this answer.", body = ActionBody),
        (status = 400, description = "The body is not an answer to an action of this type (`param` names the field).", body = ErrorEnvelope),
        (status = 403, description = "The agent's `humanInTheLoop.answer_key_ids` does not name this key (`answer_not_permitted`).", body = ErrorEnvelope),
        (status = 404, description = "No such session in this project (`session_not_found`), or no such action in the session (`action_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The action was already answered, expired or was cancelled (`action_not_pending`, with its `action_status`).", body = ErrorEnvelope),
    ),
)]
pub async fn answer(
    State(app): State<App>,
    auth: ProjectAuth,
    Path((session_id, id)): Path<(String, String)>,
    Wire(fields, _): Wire<AnswerFields, ClientError>,
) -> Result<Json<ActionBody>, ClientError> {
    let session: SessionId = session_id.parse().map_err(|_| ClientError::SessionNotFound)?;
    // A malformed action id is only told once the session is known.
    let id = action_id(&id).ok();
    let settled = actions::answer(&app.store, auth.project_id, &session, id, &auth.key_id, fields).await?;
    Ok(Json(ActionBody::from(&settled)))
}
