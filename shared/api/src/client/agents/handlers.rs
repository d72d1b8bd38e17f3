use agentplane_domain::agent::AgentFields;
use agentplane_domain::ids::AgentId;
use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_engine::agents::Authoring;
use agentplane_store::Store;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;

use super::wire::{AgentBody, AgentVersionBody, CreateAgent, UpdateAgent, VersionPageParams};
use crate::body::Wire;
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::envelope::ErrorEnvelope;
use crate::list::{List, PageParams};
use crate::{App, edge};

fn agent_id(text: &str) -> Result<AgentId, ClientError> {
    text.parse().map_err(|_| ClientError::AgentNotFound)
}

/// Authoring over this deployment's store, tools, webhook rules and ceilings.
fn authoring(app: &App) -> Authoring<'_, Store> {
    Authoring { store: &app.store, tools: &app.tools, webhooks: &app.webhooks, ceilings: app.ceilings() }
}

/// Create an agent.
///
/// The body is read as `CreateAgent` describes it; a partial `config` section is laid over
/// the defaults.
#[utoipa::path(
    post,
    path = "/api/client/v1/agents",
    tag = "client",
    operation_id = "client-agents-create",
    request_body = CreateAgent,
    responses(
        (status = 201, description = "The new agent.", body = AgentBody),
        (status = 400, description = "The body is not a valid agent (`param` names the field; `url_not_allowed` for a `default_callback_url` deliveries may not reach).", body = ErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    auth: ProjectAuth,
    Wire(body, _): Wire<CreateAgent, ClientError>,
) -> Result<(StatusCode, Json<AgentBody>), ClientError> {
    let fields = AgentFields::try_from(body)?;
    let id = AgentId::from_random(edge::random()?);
    let agent = authoring(&app).create(auth.project_id, id, fields).await?;
    Ok((StatusCode::CREATED, Json(AgentBody::from(&agent))))
}

/// List the project's agents, newest first.
#[utoipa::path(
    get,
    path = "/api/client/v1/agents",
    tag = "client",
    operation_id = "client-agents-list",
    params(PageParams),
    responses(
        (status = 200, description = "A page of agents.", body = List<AgentBody>),
        (status = 400, description = "A page parameter is invalid.", body = ErrorEnvelope),
        (status = 404, description = "`after` names no agent of this project (`cursor_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: ProjectAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<List<AgentBody>>, ClientError> {
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
    Ok(Json(List::of(&found, |a| AgentBody::from(a), |a| a.id.to_string())))
}

/// Retrieve an agent.
#[utoipa::path(
    get,
    path = "/api/client/v1/agents/{agent_id}",
    tag = "client",
    operation_id = "client-agents-get",
    params(("agent_id" = String, Path, description = "The agent's id.")),
    responses(
        (status = 200, description = "The agent.", body = AgentBody),
        (status = 404, description = "No such agent in this project (`agent_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<Json<AgentBody>, ClientError> {
    let agent = app
        .store
        .agents()
        .get(&auth.project_id, &agent_id(&id)?)
        .await
        .or_not_found(ClientError::AgentNotFound)?;
    Ok(Json(AgentBody::from(&agent)))
}

/// Edit an agent's draft (and `config.execution`, which is live).
///
/// A concurrent edit is retried on the fresh agent a few times, so two patches of different
/// fields both land.
#[utoipa::path(
    patch,
    path = "/api/client/v1/agents/{agent_id}",
    tag = "client",
    operation_id = "client-agents-update",
    params(("agent_id" = String, Path, description = "The agent's id.")),
    request_body = UpdateAgent,
    responses(
        (status = 200, description = "The agent as changed.", body = AgentBody),
        (status = 400, description = "The body is not a valid change (`param` names the field; `url_not_allowed` for a `default_callback_url` deliveries may not reach).", body = ErrorEnvelope),
        (status = 404, description = "No such agent in this project (`agent_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The agent kept changing meanwhile (`concurrent_update`); try again.", body = ErrorEnvelope),
    ),
)]
pub async fn update(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    Wire(body, _): Wire<UpdateAgent, ClientError>,
) -> Result<Json<AgentBody>, ClientError> {
    let id = agent_id(&id)?;
    let fields = AgentFields::try_from(body)?;
    let agent = authoring(&app).update(&auth.project_id, &id, fields).await?;
    Ok(Json(AgentBody::from(&agent)))
}

/// Publish the draft as the agent's next version.
#[utoipa::path(
    post,
    path = "/api/client/v1/agents/{agent_id}/publish",
    tag = "client",
    operation_id = "client-agents-publish",
    params(("agent_id" = String, Path, description = "The agent's id.")),
    responses(
        (status = 201, description = "The new version.", body = AgentVersionBody),
        (status = 404, description = "No such agent in this project (`agent_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The agent kept changing meanwhile (`concurrent_update`); try again.", body = ErrorEnvelope),
    ),
)]
pub async fn publish(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<AgentVersionBody>), ClientError> {
    let version = authoring(&app).publish(&auth.project_id, &agent_id(&id)?).await?;
    Ok((StatusCode::CREATED, Json(AgentVersionBody::from(&version))))
}

/// List an agent's published versions.
///
/// A keyset page like every other list; `after` is a version number of this agent (another
/// value is a 404 `cursor_not_found`).
#[utoipa::path(
    get,
    path = "/api/client/v1/agents/{agent_id}/versions",
    tag = "client",
    operation_id = "client-agents-versions",
    params(("agent_id" = String, Path, description = "The agent's id."), VersionPageParams),
    responses(
        (status = 200, description = "A page of the agent's versions.", body = List<AgentVersionBody>),
        (status = 400, description = "A page parameter is invalid.", body = ErrorEnvelope),
        (status = 404, description = "No such agent (`agent_not_found`), or `after` is not one of its versions (`cursor_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn versions(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<List<AgentVersionBody>>, ClientError> {
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
    Ok(Json(List::of(&found, |v| AgentVersionBody::from(v), |v| v.version.to_string())))
}

/// A version number as a cursor: digits only, 1 or more.
fn parse_version(text: &str) -> Option<u32> {
    (!text.is_empty() && text.len() <= 10 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse::<u32>().ok())
        .flatten()
        .filter(|n| *n > 0)
}
