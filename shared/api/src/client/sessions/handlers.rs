use agentplane_domain::SessionId;
use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;
use serde_json::{Value, json};

use super::{runtime, validation, wire};
use crate::body::JsonObject;
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::{App, edge};

/// A malformed id is indistinguishable from a missing session.
fn session_id(text: &str) -> Result<SessionId, ClientError> {
    text.parse().map_err(|_| ClientError::SessionNotFound)
}

#[utoipa::path(
    post,
    path = "/api/client/v1/sessions",
    tag = "client",
    operation_id = "client-sessions-create",
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn create(
    State(app): State<App>,
    auth: ProjectAuth,
    JsonObject(body, _): JsonObject<ClientError>,
) -> Result<(StatusCode, Json<Value>), ClientError> {
    let new = validation::new_session(&body)?;
    // The agent must be one of the caller's project: another project's is as missing (404).
    if let Some(agent_id) = &new.agent_id {
        app.store.agents().get(&auth.project_id, agent_id).await.or_not_found(ClientError::AgentNotFound)?;
    }
    let id = SessionId::from_random(edge::random()?);
    let mut session = new.into_session(id, auth.project_id, edge::now());
    runtime::prepare(&mut session)?;
    app.store.sessions().create(&session).await?;
    runtime::allocate(&app, &session).await?;
    Ok((StatusCode::CREATED, Json(wire::render(&session))))
}

#[utoipa::path(
    get,
    path = "/api/client/v1/sessions",
    tag = "client",
    operation_id = "client-sessions-list",
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn list(
    State(app): State<App>,
    auth: ProjectAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ClientError> {
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
    let render = |session: &agentplane_domain::session::Session| wire::render(&session.clone().settled(now));
    Ok(Json(crate::list::body(&found, render, |s| s.id.to_string())))
}

#[utoipa::path(
    get,
    path = "/api/client/v1/sessions/{session_id}",
    tag = "client",
    operation_id = "client-sessions-get",
    params(("session_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn get(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ClientError> {
    let id = session_id(&id)?;
    let session =
        app.store.sessions().get(&auth.project_id, &id).await.or_not_found(ClientError::SessionNotFound)?;
    Ok(Json(wire::render(&session.settled(edge::now()))))
}

#[utoipa::path(
    patch,
    path = "/api/client/v1/sessions/{session_id}",
    tag = "client",
    operation_id = "client-sessions-update",
    params(("session_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn update(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    JsonObject(body, _): JsonObject<ClientError>,
) -> Result<Json<Value>, ClientError> {
    let id = session_id(&id)?;
    let patch = validation::patch(&body)?;
    let now = edge::now();
    let session = app
        .store
        .sessions()
        .update(&auth.project_id, &id, patch, now)
        .await
        .or_not_found(ClientError::SessionNotFound)?;
    if session.holder_died(now) {
        // A write records what reads already show: the dead turn ended in error.
        app.store.sessions().settle_dead_turn(&auth.project_id, &id, now).await?;
    }
    Ok(Json(wire::render(&session.settled(now))))
}

#[utoipa::path(
    delete,
    path = "/api/client/v1/sessions/{session_id}",
    tag = "client",
    operation_id = "client-sessions-delete",
    params(("session_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn delete(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ClientError> {
    let id = session_id(&id)?;
    runtime::release(&app, &auth.project_id, &id).await?;
    app.store
        .sessions()
        .delete(&auth.project_id, &id, edge::now())
        .await
        .or_not_found(ClientError::SessionNotFound)?;
    Ok(Json(json!({ "id": id, "object": "session.deleted", "deleted": true })))
}
