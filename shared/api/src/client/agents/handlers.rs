use agentplane_domain::ValidationError;
use agentplane_domain::agent::{self, Agent};
use agentplane_domain::ids::AgentId;
use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_store::StoreError;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;
use serde_json::Value;

use super::wire::{render, render_version};
use crate::body::JsonObject;
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::{App, edge};

fn agent_id(text: &str) -> Result<AgentId, ClientError> {
    text.parse().map_err(|_| ClientError::AgentNotFound)
}

/// Every tool an agent names must exist in the registry.
fn check_tools(app: &App, agent: &Agent) -> Result<(), ClientError> {
    for (i, name) in agent.draft.tools.iter().enumerate() {
        if !app.engine.tools.contains(name) {
            let known: Vec<&str> = app.engine.tools.names().collect();
            return Err(ValidationError::new(
                format!("tools[{i}]"),
                format!("unknown tool `{name}`; known: {}", known.join(", ")),
            )
            .into());
        }
    }
    Ok(())
}

#[utoipa::path(
    post,
    path = "/api/client/v1/agents",
    tag = "client",
    operation_id = "client-agents-create",
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn create(
    State(app): State<App>,
    auth: ProjectAuth,
    JsonObject(body, _): JsonObject<ClientError>,
) -> Result<(StatusCode, Json<Value>), ClientError> {
    let id = AgentId::from_random(edge::random()?);
    let agent = agent::new_agent(&body, id, auth.project_id, edge::now())?;
    check_tools(&app, &agent)?;
    app.store.agents().create(&agent).await?;
    Ok((StatusCode::CREATED, Json(render(&agent))))
}

#[utoipa::path(
    get,
    path = "/api/client/v1/agents",
    tag = "client",
    operation_id = "client-agents-list",
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn list(
    State(app): State<App>,
    auth: ProjectAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ClientError> {
    let page = PageRequest::from_query(&Query::parse(raw.as_deref()))?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<AgentId>().map_err(|_| ClientError::CursorNotFound)?),
        None => None,
    };
    let found = app
        .store
        .agents()
        .list(&auth.project_id, &page, after.as_ref())
        .await
        .or_not_found(ClientError::CursorNotFound)?;
    Ok(Json(crate::list::body(&found, render, |a| a.id.to_string())))
}

#[utoipa::path(
    get,
    path = "/api/client/v1/agents/{agent_id}",
    tag = "client",
    operation_id = "client-agents-get",
    params(("agent_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn get(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ClientError> {
    let agent = app
        .store
        .agents()
        .get(&auth.project_id, &agent_id(&id)?)
        .await
        .or_not_found(ClientError::AgentNotFound)?;
    Ok(Json(render(&agent)))
}

/// Edits the draft (and `execution`, which is live). A concurrent edit is retried on the
/// fresh agent a few times, so two patches of different fields both land.
#[utoipa::path(
    patch,
    path = "/api/client/v1/agents/{agent_id}",
    tag = "client",
    operation_id = "client-agents-update",
    params(("agent_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn update(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    JsonObject(body, _): JsonObject<ClientError>,
) -> Result<Json<Value>, ClientError> {
    let id = agent_id(&id)?;
    for _ in 0..5 {
        let mut agent =
            app.store.agents().get(&auth.project_id, &id).await.or_not_found(ClientError::AgentNotFound)?;
        let previous = agent.updated_at;
        let now = edge::now().max(previous.plus_millis(1));
        agent::patch_agent(&mut agent, &body, now)?;
        check_tools(&app, &agent)?;
        match app.store.agents().replace(&agent, previous).await {
            Ok(()) => return Ok(Json(render(&agent))),
            Err(StoreError::Conflict) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(ClientError::ConcurrentUpdate)
}

/// Freezes the draft as the next version.
#[utoipa::path(
    post,
    path = "/api/client/v1/agents/{agent_id}/publish",
    tag = "client",
    operation_id = "client-agents-publish",
    params(("agent_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn publish(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Value>), ClientError> {
    let id = agent_id(&id)?;
    for _ in 0..5 {
        let agent =
            app.store.agents().get(&auth.project_id, &id).await.or_not_found(ClientError::AgentNotFound)?;
        let now = edge::now().max(agent.updated_at.plus_millis(1));
        match app.store.agents().publish(&agent, now).await {
            Ok(version) => return Ok((StatusCode::CREATED, Json(render_version(&version)))),
            Err(StoreError::Conflict) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(ClientError::ConcurrentUpdate)
}

/// `GET /agents/{id}/versions`: a keyset page like every other list; `after` is a version
/// number of this agent (another value is a 404 `cursor_not_found`).
#[utoipa::path(
    get,
    path = "/api/client/v1/agents/{agent_id}/versions",
    tag = "client",
    operation_id = "client-agents-versions",
    params(("agent_id" = String, Path)),
    responses((status = "default", description = "see the surface's spec")),
)]
pub async fn versions(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ClientError> {
    let id = agent_id(&id)?;
    let page = PageRequest::from_query(&Query::parse(raw.as_deref()))?;
    // Resolving the agent in this project first keeps other projects' versions invisible.
    app.store.agents().get(&auth.project_id, &id).await.or_not_found(ClientError::AgentNotFound)?;
    let after = match &page.after {
        Some(text) => {
            let number = parse_version(text).ok_or(ClientError::CursorNotFound)?;
            app.store.agents().version(&id, number).await.or_not_found(ClientError::CursorNotFound)?;
            Some(number)
        }
        None => None,
    };
    let found = app.store.agents().versions_page(&id, after, page.limit, page.order).await?;
    Ok(Json(crate::list::body(&found, render_version, |v| v.version.to_string())))
}

/// A version number as a cursor: digits only, 1 or more.
fn parse_version(text: &str) -> Option<u32> {
    (!text.is_empty() && text.len() <= 10 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse::<u32>().ok())
        .flatten()
        .filter(|n| *n > 0)
}
