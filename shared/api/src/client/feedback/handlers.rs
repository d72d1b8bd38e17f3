use agentplane_domain::SessionId;
use agentplane_domain::feedback::{FeedbackId, NewFeedback, Rating};
use agentplane_domain::ids::AgentId;
use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_engine::feedback;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;

use super::wire::{CreateFeedback, FeedbackBody, FeedbackParams};
use crate::App;
use crate::body::Wire;
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::envelope::ErrorEnvelope;
use crate::list::{List, PageParams};

/// Rate an assistant message of a session.
///
/// `rating` is `up` or `down`, `comment` optional. A message has one feedback: rating it again
/// replaces the rating and comment (same id; 200 instead of 201).
#[utoipa::path(
    post,
    path = "/api/client/v1/sessions/{session_id}/events/{event_id}/feedback",
    tag = "client",
    operation_id = "client-session-feedback-create",
    params(
        ("session_id" = String, Path, description = "The session's id."),
        ("event_id" = String, Path, description = "The assistant message's event id (a sequence number)."),
    ),
    request_body(content = CreateFeedback, description = "The rating."),
    responses(
        (status = 200, description = "The message's feedback, replaced.", body = FeedbackBody),
        (status = 201, description = "The message's first feedback.", body = FeedbackBody),
        (status = 400, description = "The body is invalid (`param` names the field), or the event is not an assistant message.", body = ErrorEnvelope),
        (status = 404, description = "No such session in this project (`session_not_found`), or no such event in it (`message_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The feedback kept changing meanwhile (`concurrent_update`); try again.", body = ErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    auth: ProjectAuth,
    Path((session_id, event_id)): Path<(String, String)>,
    Wire(body, _): Wire<CreateFeedback, ClientError>,
) -> Result<(StatusCode, Json<FeedbackBody>), ClientError> {
    let id: SessionId = session_id.parse().map_err(|_| ClientError::SessionNotFound)?;
    let seq = event_id.parse().ok();
    let rated = feedback::rate(&app.store, auth.project_id, &id, seq, NewFeedback::try_from(body)).await?;
    let status = if rated.replaced { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, Json(FeedbackBody::from(&rated.feedback))))
}

/// List an agent's feedback, newest first.
#[utoipa::path(
    get,
    path = "/api/client/v1/agents/{agent_id}/feedback",
    tag = "client",
    operation_id = "client-agent-feedback-list",
    params(("agent_id" = String, Path, description = "The agent's id."), FeedbackParams, PageParams),
    responses(
        (status = 200, description = "A page of the agent's feedback.", body = List<FeedbackBody>),
        (status = 400, description = "`rating` or a page parameter is invalid (`param` names it).", body = ErrorEnvelope),
        (status = 404, description = "No such agent in this project (`agent_not_found`), or `after` names no feedback of it (`cursor_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(agent_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<List<FeedbackBody>>, ClientError> {
    let query = Query::parse(raw.as_deref());
    let page = PageRequest::from_query(&query)?;
    let rating = query.single("rating")?.map(|text| Rating::parse("rating", text)).transpose()?;
    let id: AgentId = agent_id.parse().map_err(|_| ClientError::AgentNotFound)?;
    app.store.agents().get(&auth.project_id, &id).await.or_not_found(ClientError::AgentNotFound)?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<FeedbackId>().map_err(|_| ClientError::CursorNotFound)?),
        None => None,
    };
    let found = app
        .store
        .feedback()
        .list(&auth.project_id, &id, rating, &page, after.as_ref())
        .await
        .or_not_found(ClientError::CursorNotFound)?;
    Ok(Json(List::of(&found, |f| FeedbackBody::from(f), |f| f.id.to_string())))
}
