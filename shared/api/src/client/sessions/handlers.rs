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
use crate::client::error::{self, agent_not_found, cursor_not_found, session_not_found};
use crate::envelope::ApiError;
use crate::{App, edge};

/// A malformed id is indistinguishable from a missing session.
fn session_id(text: &str) -> Result<SessionId, ApiError> {
    text.parse().map_err(|_| session_not_found())
}

pub async fn create(
    State(app): State<App>,
    auth: ProjectAuth,
    JsonObject(body, _): JsonObject<ApiError>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let new = validation::new_session(&body)?;
    // The agent must be one of the caller's project: another project's is as missing (404).
    if let Some(agent_id) = &new.agent_id {
        app.store.agents().get(&auth.project_id, agent_id).await.map_err(error::store(agent_not_found))?;
    }
    let id = SessionId::from_random(edge::random().map_err(|_| ApiError::internal("randomness"))?);
    let mut session = new.into_session(id, auth.project_id, edge::now());
    runtime::prepare(&mut session)?;
    app.store.sessions().create(&session).await.map_err(|e| ApiError::storage(&e))?;
    runtime::allocate(&app, &session).await?;
    Ok((StatusCode::CREATED, Json(wire::render(&session))))
}

pub async fn list(
    State(app): State<App>,
    auth: ProjectAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let page = PageRequest::from_query(&Query::parse(raw.as_deref()))?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<SessionId>().map_err(|_| cursor_not_found())?),
        None => None,
    };
    let found = app
        .store
        .sessions()
        .list(&auth.project_id, &page, after.as_ref())
        .await
        .map_err(error::store(cursor_not_found))?;
    let now = edge::now();
    let render = |session: &agentplane_domain::session::Session| wire::render(&session.clone().settled(now));
    Ok(Json(crate::list::body(&found, render, |s| s.id.to_string())))
}

pub async fn get(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = session_id(&id)?;
    let session =
        app.store.sessions().get(&auth.project_id, &id).await.map_err(error::store(session_not_found))?;
    Ok(Json(wire::render(&session.settled(edge::now()))))
}

pub async fn update(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    JsonObject(body, _): JsonObject<ApiError>,
) -> Result<Json<Value>, ApiError> {
    let id = session_id(&id)?;
    let patch = validation::patch(&body)?;
    let now = edge::now();
    let session = app
        .store
        .sessions()
        .update(&auth.project_id, &id, patch, now)
        .await
        .map_err(error::store(session_not_found))?;
    if session.holder_died(now) {
        // A write records what reads already show: the dead turn ended in error.
        app.store
            .sessions()
            .settle_dead_turn(&auth.project_id, &id, now)
            .await
            .map_err(|e| ApiError::storage(&e))?;
    }
    Ok(Json(wire::render(&session.settled(now))))
}

pub async fn delete(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = session_id(&id)?;
    runtime::release(&app, &auth.project_id, &id).await?;
    app.store
        .sessions()
        .delete(&auth.project_id, &id, edge::now())
        .await
        .map_err(error::store(session_not_found))?;
    Ok(Json(json!({ "id": id, "object": "session.deleted", "deleted": true })))
}
