//! `/v1/environments`: create (or fork), list, get, delete.

use agentplane_domain::page::PageRequest;
use agentplane_domain::platform::{Environment, environment_name};
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_engine::platform::environments;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;

use super::auth::PlatformAuth;
use super::error::{Found, PlatformError, PlatformErrorEnvelope};
use super::platform;
use super::wire::{CreateEnvironment, Data, EnvironmentBody, ListPage, PAGE_PARAMS, Strict, only_query};
use crate::App;
use crate::list::PageParams;

/// A malformed id names nothing: 404, like a missing environment.
pub fn environment_id(text: &str) -> Result<EnvironmentId, PlatformError> {
    text.parse().map_err(|_| PlatformError::EnvironmentNotFound)
}

/// The environment of the caller's project (another project's: 404).
pub async fn load(app: &App, auth: &PlatformAuth, id: &str) -> Result<Environment, PlatformError> {
    let id = environment_id(id)?;
    app.store
        .environments()
        .get(&auth.0.project_id, &id)
        .await
        .or_not_found(PlatformError::EnvironmentNotFound)
}

/// Create an environment, empty or (with `snapshotId`) a fork whose workspace starts as that
/// checkpoint of another environment of the project.
#[utoipa::path(
    post,
    path = "/v1/environments",
    tag = "platform",
    operation_id = "platform-environments-create",
    request_body(content = CreateEnvironment, description = "Every field is optional; unknown fields are refused."),
    responses(
        (status = 201, description = "The new environment.", body = Data<EnvironmentBody>),
        (status = 400, description = "Invalid request (`details.param` names the field).", body = PlatformErrorEnvelope),
        (status = 404, description = "`snapshotId` names no checkpoint an environment or Run of this project returned (`snapshot_not_found`).", body = PlatformErrorEnvelope),
        (status = 409, description = "`quota_exceeded`: the project holds the most environments it may (`details.quota` `environments`, `details.max`); deleting one gives a place back.", body = PlatformErrorEnvelope),
        (status = 503, description = "Storage is unavailable, or no sandbox node can hold the fork's workspace now (`platform_runtime_unavailable`); try again.", body = PlatformErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    auth: PlatformAuth,
    Strict(body): Strict<CreateEnvironment>,
) -> Result<(StatusCode, Json<Data<EnvironmentBody>>), PlatformError> {
    let name = environment_name("name", body.name.as_deref())?;
    let snapshot = body.snapshot_id.as_deref().map(super::fork::snapshot_id).transpose()?;
    let environment = environments::create(&platform(&app), auth.0.project_id, name, snapshot).await?;
    Ok((StatusCode::CREATED, Data::of(EnvironmentBody::from(&environment))))
}

/// List the project's environments, newest first.
#[utoipa::path(
    get,
    path = "/v1/environments",
    tag = "platform",
    operation_id = "platform-environments-list",
    params(PageParams),
    responses(
        (status = 200, description = "A page of environments.", body = ListPage<EnvironmentBody>),
        (status = 400, description = "A page parameter is invalid, or the query names another (`details.param` names it).", body = PlatformErrorEnvelope),
        (status = 404, description = "`after` names no environment of this project (`cursor_not_found`).", body = PlatformErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: PlatformAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<ListPage<EnvironmentBody>>, PlatformError> {
    let page = PageRequest::from_query(&only_query(raw.as_deref(), PAGE_PARAMS)?)?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<EnvironmentId>().map_err(|_| PlatformError::CursorNotFound)?),
        None => None,
    };
    let found = app
        .store
        .environments()
        .list(&auth.0.project_id, &page, after.as_ref())
        .await
        .or_not_found(PlatformError::CursorNotFound)?;
    Ok(ListPage::of(&found, |e| EnvironmentBody::from(e), |e| e.id.to_string()))
}

/// Retrieve an environment.
#[utoipa::path(
    get,
    path = "/v1/environments/{environmentId}",
    tag = "platform",
    operation_id = "platform-environments-get",
    params(("environmentId" = String, Path, min_length = 1, description = "The environment's id.")),
    responses(
        (status = 200, description = "The environment.", body = Data<EnvironmentBody>),
        (status = 400, description = "Invalid request: a query parameter (this route takes none; `details.param` names it).", body = PlatformErrorEnvelope),
        (status = 404, description = "No such environment in this project (`environment_not_found`).", body = PlatformErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: PlatformAuth,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Data<EnvironmentBody>>, PlatformError> {
    only_query(raw.as_deref(), &[])?;
    let environment = load(&app, &auth, &id).await?;
    Ok(Data::of(EnvironmentBody::from(&environment)))
}

/// Delete an environment.
///
/// Accepted at once: from then on the environment, its sessions and its Runs read 404 and no
/// Run can be created in it; the retention sweep then ends its sandbox and deletes its Runs,
/// its sessions' links and the checkpoints no other environment shares
/// (`agentplane_engine::environment_purge`). A retry while the purge has not finished answers
/// the same 202; once it has, the environment is unknown (404).
#[utoipa::path(
    delete,
    path = "/v1/environments/{environmentId}",
    tag = "platform",
    operation_id = "platform-environments-delete",
    params(("environmentId" = String, Path, min_length = 1, description = "The environment's id.")),
    responses(
        (status = 202, description = "Deletion accepted (`deletedAt` set); the purge follows.", body = Data<EnvironmentBody>),
        (status = 404, description = "No such environment in this project (`environment_not_found`).", body = PlatformErrorEnvelope),
    ),
)]
pub async fn delete(
    State(app): State<App>,
    auth: PlatformAuth,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Data<EnvironmentBody>>), PlatformError> {
    let id = environment_id(&id)?;
    let environment = environments::delete(&app.store, auth.0.project_id, &id).await?;
    Ok((StatusCode::ACCEPTED, Data::of(EnvironmentBody::from(&environment))))
}
