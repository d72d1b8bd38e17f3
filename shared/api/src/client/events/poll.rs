//! `GET /api/client/v1/sessions/{id}/events?after={seq}&limit=` (limit 1–100, default 20).

use agentplane_domain::page::PageLimit;
use agentplane_domain::query::Query;
use agentplane_domain::{SessionId, ValidationError};
use axum::Json;
use axum::extract::{Path, RawQuery, State};

use super::wire::{EventList, EventsParams, parse_seq};
use crate::App;
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::envelope::ErrorEnvelope;

/// List a session's events, oldest first.
#[utoipa::path(
    get,
    path = "/api/client/v1/sessions/{session_id}/events",
    tag = "client",
    operation_id = "client-session-events-list",
    params(("session_id" = String, Path, description = "The session's id."), EventsParams),
    responses(
        (status = 200, description = "A page of events after `after`.", body = EventList),
        (status = 400, description = "`after` or `limit` is invalid (`param` names it).", body = ErrorEnvelope),
        (status = 404, description = "No such session in this project (`session_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<EventList>, ClientError> {
    let id: SessionId = id.parse().map_err(|_| ClientError::SessionNotFound)?;
    let query = Query::parse(raw.as_deref());
    let after = match query.single("after")? {
        Some(text) => parse_seq(text)
            .ok_or_else(|| ValidationError::new("after", "`after` must be a non-negative integer"))?,
        None => 0,
    };
    let limit = match query.single("limit")? {
        Some(text) => PageLimit::parse(text)?,
        None => PageLimit::DEFAULT,
    };
    let session =
        app.store.sessions().get(&auth.project_id, &id).await.or_not_found(ClientError::SessionNotFound)?;
    let page = app.store.events().list_after(&id, after, limit).await?;
    Ok(Json(EventList::marked(&page, &session.superseded_turns)))
}
