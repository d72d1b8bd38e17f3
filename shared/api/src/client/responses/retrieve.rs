//! A Response after its call: read it back, cancel it, delete it, list the messages it was
//! given. A Response is a session (`resp_{session_id}`); it reads as the session's latest turn
//! (see `latest`), rendered as `POST /responses` renders a finished call. Cancel and delete are
//! the session's own (`agentplane_engine::sessions`).

use agentplane_domain::SessionId;
use agentplane_domain::ValidationError;
use agentplane_domain::event::{Event, EventPayload, EventType};
use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_domain::session::RuntimeStatus;
use agentplane_engine::sessions;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};

use super::latest::{self, LatestTurn};
use super::wire::{Rendered, ResponseBody};
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::envelope::ErrorEnvelope;
use crate::list::List;
use crate::sandbox::managed;
use crate::{App, edge};

/// `resp_{session_id}`: a malformed id is indistinguishable from a missing session.
fn session_id(text: &str) -> Result<SessionId, ClientError> {
    text.strip_prefix("resp_").and_then(|id| id.parse().ok()).ok_or(ClientError::SessionNotFound)
}

/// The Response of session `id` as it is now: its latest turn. A session with no turn (or
/// whose turn's events have expired) has none.
async fn response(app: &App, auth: &ProjectAuth, id: SessionId) -> Result<ResponseBody, ClientError> {
    let session = app
        .store
        .sessions()
        .get(&auth.project_id, &id)
        .await
        .or_not_found(ClientError::SessionNotFound)?
        .settled(edge::now());
    let events = latest::events(app, &session).await?;
    let actions = match session.runtime_status {
        RuntimeStatus::RequiresAction => app.store.actions().pending(&auth.project_id, &id).await?,
        _ => Vec::new(),
    };
    let turn = LatestTurn::read(&session, &events, actions).ok_or(ClientError::SessionNotFound)?;
    let rendered = Rendered {
        session_id: id,
        output: turn.output,
        instructions: None,
        tools: &[],
        agent_id: turn.started.agent_id.to_string(),
        version: turn.started.version,
        model: &turn.started.model,
        metadata: &session.metadata,
        created_at: turn.started_at.unix_seconds(),
    };
    Ok(ResponseBody::from_turn(rendered, &turn.outcome, turn.running))
}

/// Retrieve a Response: its session's latest turn.
///
/// `status` is `in_progress` while the turn runs, `requires_action` while it waits for actions
/// (`required_action` lists them), else how it ended; `output` and `usage` are the turn's so far.
#[utoipa::path(
    get,
    path = "/api/client/v1/responses/{response_id}",
    tag = "client",
    operation_id = "client-responses-get",
    params(("response_id" = String, Path, description = "The Response's id (`resp_{session_id}`).")),
    responses(
        (status = 200, description = "The Response as its session's latest turn reads now.", body = ResponseBody),
        (status = 404, description = "No such Response: no session of this project, or one with no turn yet (`session_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<ResponseBody>, ClientError> {
    let id = session_id(&id)?;
    Ok(Json(response(&app, &auth, id).await?))
}

/// Cancel a Response's turn.
///
/// As `POST /api/client/v1/sessions/{session_id}/cancel`: a turn paused for actions or by its
/// budget ends at once (`incomplete`, `stop_reason: cancelled`); a running one stops at its next
/// step (the Response answered is still `in_progress`).
#[utoipa::path(
    post,
    path = "/api/client/v1/responses/{response_id}/cancel",
    tag = "client",
    operation_id = "client-responses-cancel",
    params(("response_id" = String, Path, description = "The Response's id (`resp_{session_id}`).")),
    responses(
        (status = 200, description = "The cancel is recorded; the Response as it is now.", body = ResponseBody),
        (status = 404, description = "No such Response in this project (`session_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "No turn is running or paused in its session (`nothing_to_cancel`, with its `runtime_status`).", body = ErrorEnvelope),
    ),
)]
pub async fn cancel(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<ResponseBody>, ClientError> {
    let id = session_id(&id)?;
    sessions::cancel(app.engine(), auth.project_id, id).await?;
    Ok(Json(response(&app, &auth, id).await?))
}

/// `DELETE /api/client/v1/responses/{response_id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResponseDeleted {
    /// `resp_{session_id}`.
    pub id: String,
    /// Always `response`.
    #[schema(value_type = String, pattern = "^response$")]
    pub object: &'static str,
    /// Always `true`.
    pub deleted: bool,
}

/// Delete a Response: its session, as `DELETE /api/client/v1/sessions/{session_id}` does.
///
/// Its session's pending actions end as `cancelled` and its managed compute, if any, stops.
#[utoipa::path(
    delete,
    path = "/api/client/v1/responses/{response_id}",
    tag = "client",
    operation_id = "client-responses-delete",
    params(("response_id" = String, Path, description = "The Response's id (`resp_{session_id}`).")),
    responses(
        (status = 200, description = "The Response and its session are deleted.", body = ResponseDeleted),
        (status = 404, description = "No such Response in this project (`session_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn delete(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<ResponseDeleted>, ClientError> {
    let id = session_id(&id)?;
    sessions::delete(&app.store, &managed::nodes(&app), auth.project_id, id).await?;
    Ok(Json(ResponseDeleted { id: format!("resp_{id}"), object: "response", deleted: true }))
}

/// The text of an input message.
#[derive(Debug, Serialize, ToSchema)]
pub struct InputTextContent {
    /// Always `input_text`.
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^input_text$")]
    pub kind: &'static str,
    pub text: String,
}

/// A message the Response's session was sent (a `message.user` event).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ResponseInputItem)]
pub struct InputItemBody {
    /// Always `message`.
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^message$")]
    pub kind: &'static str,
    /// `msg_{session_id}_{seq}`: the event's place in the session's log.
    pub id: String,
    /// Always `user`.
    #[schema(value_type = String, pattern = "^user$")]
    pub role: &'static str,
    /// Always `completed`.
    #[schema(value_type = String, pattern = "^completed$")]
    pub status: &'static str,
    pub content: Vec<InputTextContent>,
}

impl InputItemBody {
    fn of(event: &Event) -> Self {
        let text = match event.payload() {
            EventPayload::UserMessage(message) => message.text,
            _ => String::new(),
        };
        Self {
            kind: "message",
            id: item_id(&event.session_id, event.seq),
            role: "user",
            status: "completed",
            content: vec![InputTextContent { kind: "input_text", text }],
        }
    }
}

fn item_id(session: &SessionId, seq: u64) -> String {
    format!("msg_{session}_{seq}")
}

/// The event `seq` an `after` names: an item id of this session's list.
fn after_seq(session: &SessionId, text: &str) -> Result<u64, ValidationError> {
    let invalid = || ValidationError::new("after", "`after` must be the id of an item of this list");
    let rest = text.strip_prefix("msg_").ok_or_else(invalid)?;
    let (of, seq) = rest.rsplit_once('_').ok_or_else(invalid)?;
    if of != session.to_string() {
        return Err(invalid());
    }
    crate::client::events::wire::parse_seq(seq).ok_or_else(invalid)
}

/// The page parameters of `input_items`.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct InputItemsParams {
    /// The id of the last item of the previous page (`msg_…`); one that is not an item id of
    /// this list answers 400.
    after: Option<String>,
    /// Page size, 1 to 100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u16>,
    /// `desc` (newest first, the default) or `asc`.
    #[param(pattern = "^(asc|desc)$")]
    order: Option<String>,
}

/// List the messages a Response's session was sent.
///
/// Every user message of the session, of every turn (edited and regenerated ones included).
#[utoipa::path(
    get,
    path = "/api/client/v1/responses/{response_id}/input_items",
    tag = "client",
    operation_id = "client-responses-input-items",
    params(("response_id" = String, Path, description = "The Response's id (`resp_{session_id}`)."), InputItemsParams),
    responses(
        (status = 200, description = "A page of the session's user messages.", body = List<InputItemBody>),
        (status = 400, description = "`after`, `limit` or `order` is invalid (`param` names it).", body = ErrorEnvelope),
        (status = 404, description = "No such Response in this project (`session_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn input_items(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<List<InputItemBody>>, ClientError> {
    let id = session_id(&id)?;
    let page = PageRequest::from_query(&Query::parse(raw.as_deref()))?;
    let after = page.after.as_deref().map(|text| after_seq(&id, text)).transpose()?;
    app.store.sessions().get(&auth.project_id, &id).await.or_not_found(ClientError::SessionNotFound)?;
    let found =
        app.store.events().page(&id, after, page.order, page.limit, Some(&EventType::UserMessage)).await?;
    Ok(Json(List::of(&found, InputItemBody::of, |e| item_id(&e.session_id, e.seq))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_id_is_its_sessions_id_with_the_resp_prefix() {
        let session = SessionId::from_random([9; 16]);
        assert_eq!(session_id(&format!("resp_{session}")).ok(), Some(session));
        for bad in [session.to_string(), format!("resp_{session}x"), "resp_".into(), format!("msg_{session}")]
        {
            assert!(matches!(session_id(&bad), Err(ClientError::SessionNotFound)), "{bad}");
        }
    }

    #[test]
    fn after_names_an_item_of_this_sessions_list() {
        let session = SessionId::from_random([9; 16]);
        let other = SessionId::from_random([8; 16]);
        assert_eq!(after_seq(&session, &item_id(&session, 12)).ok(), Some(12));
        for bad in [item_id(&other, 12), format!("msg_{session}_"), format!("msg_{session}_-1"), "12".into()]
        {
            let err = after_seq(&session, &bad).err().and_then(|e| e.param);
            assert_eq!(err.as_deref(), Some("after"), "{bad}");
        }
    }
}
