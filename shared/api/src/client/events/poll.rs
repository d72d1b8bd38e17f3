//! `GET /api/client/v1/sessions/{id}/events?after={seq}&limit=` (limit 1–100, default 20).

use agentplane_domain::page::PageLimit;
use agentplane_domain::query::Query;
use agentplane_domain::{SessionId, ValidationError};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde_json::{Value, json};

use super::wire::{parse_seq, render};
use crate::App;
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};

#[utoipa::path(
    get,
    path = "/api/client/v1/sessions/{session_id}/events",
    tag = "client",
    operation_id = "client-session-events-list",
    params(("session_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn list(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ClientError> {
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
    app.store.sessions().get(&auth.project_id, &id).await.or_not_found(ClientError::SessionNotFound)?;
    let page = app.store.events().list_after(&id, after, limit).await?;
    Ok(Json(json!({
        "object": "list",
        "data": page.items.iter().map(render).collect::<Vec<_>>(),
        "has_more": page.has_more,
        "first_id": page.items.first().map(|e| e.seq),
        "last_id": page.items.last().map(|e| e.seq),
    })))
}
