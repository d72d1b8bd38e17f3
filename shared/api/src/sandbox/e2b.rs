//! The lifecycle routes the E2B SDKs call (`E2B_API_URL` = `…/sandbox/v1`): `POST`/`GET
//! /v2/sandboxes` and `POST /sandboxes/{id}/connect` (and its `/v2/` twin), over the same
//! sandboxes, store and nodes as the rest of the sandbox API. A sandbox made here gets an envd
//! access token, shown to its project on create, connect and read.

use std::sync::OnceLock;

use agentplane_domain::Timestamp;
use agentplane_domain::page::PageLimit;
use agentplane_domain::query::Query;
use agentplane_domain::sandbox::listing::{self, ListQuery};
use agentplane_domain::sandbox::request::CreateSandbox;
use agentplane_domain::sandbox::{Sandbox, SandboxId};
use agentplane_engine::{envd_token, sandboxes};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};
use utoipa::IntoParams;

use super::auth::SandboxAuth;
use super::e2b_wire as wire;
use super::error::{E2bError, SandboxError};
use super::sandboxes::{Launch, launch, lifecycle_is_ours, load};
use crate::body::Wire;
use crate::{App, edge};

/// Sandboxes one list request reads at most while looking for those it shows; past that it
/// answers what it found and a token to read on from.
const MAX_EXAMINED: usize = 1000;
/// Sandboxes read from the store at a time.
const STORE_PAGE: i64 = 100;

/// `AGENTPLANE_E2B_DOMAIN`, read once: where envd clients reach sandboxes (E2B's `domain`).
pub fn e2b_domain() -> Option<String> {
    static DOMAIN: OnceLock<Option<String>> = OnceLock::new();
    DOMAIN
        .get_or_init(|| {
            std::env::var("AGENTPLANE_E2B_DOMAIN").ok().map(|d| d.trim().to_owned()).filter(|d| !d.is_empty())
        })
        .clone()
}

/// The sandbox's envd access token, opened for its owning project.
pub fn envd_access_token(app: &App, sandbox: &Sandbox) -> Result<Option<String>, SandboxError> {
    if sandbox.envd_token_sealed.is_none() {
        return Ok(None);
    }
    let key = app.webhooks.key.as_deref().ok_or(SandboxError::NoSealKey)?;
    envd_token::open(key, sandbox).map_err(|err| {
        tracing::error!(error = %err, sandbox = %sandbox.id, "the envd access token does not open");
        SandboxError::Internal("envd access token")
    })
}

/// Launches a sandbox for a client: with an envd access token sealed under the deployment's key.
pub async fn launch_with_token(
    app: &App,
    project_id: agentplane_domain::ProjectId,
    new: CreateSandbox,
) -> Result<Sandbox, SandboxError> {
    let key = app.webhooks.key.clone().ok_or(SandboxError::NoSealKey)?;
    launch(app, Launch { project_id, new, session_id: None, envd_key: Some(key) }).await
}

/// Create a sandbox (E2B's `POST /v2/sandboxes`) on the online node heard from most recently,
/// and wait until it runs.
#[utoipa::path(
    post,
    path = "/sandbox/v1/v2/sandboxes",
    tag = "sandbox",
    operation_id = "sandbox-v2-create",
    request_body = wire::NewSandboxV2,
    responses(
        (status = 201, description = "The sandbox runs.", body = wire::StartedSandbox),
        (status = 400, description = "The body is not a valid request, or asks for what this deployment cannot honour.", body = E2bError),
        (status = 401, description = "Missing, invalid or revoked API key.", body = E2bError),
        (status = 500, description = "An internal error.", body = E2bError),
        (status = 503, description = "No node is online, the node did not answer in time or refused, the deployment has no sealing key, or storage is unavailable.", body = E2bError),
    ),
)]
pub async fn create(
    State(app): State<App>,
    auth: SandboxAuth,
    Wire(body, _): Wire<wire::NewSandboxV2, SandboxError>,
) -> Result<(StatusCode, Json<wire::StartedSandbox>), SandboxError> {
    let new = CreateSandbox::try_from(body)?;
    let sandbox = launch_with_token(&app, auth.0.project_id, new).await?;
    let token = envd_access_token(&app, &sandbox)?;
    Ok((StatusCode::CREATED, Json(wire::StartedSandbox::of(&sandbox, token, e2b_domain()))))
}

/// `GET /v2/sandboxes`. Any other parameter, or one given twice, is a 400.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ListParams {
    /// A comma list of `running` and `paused` (default both).
    #[param(pattern = "^(running|paused)(,(running|paused))*$")]
    state: Option<String>,
    /// `key=value` pairs joined by `&`, url-encoded (as the E2B SDKs send it); every pair must match.
    metadata: Option<String>,
    /// Most sandboxes in the page, 1 to 100 (default 100).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u16>,
    /// The previous page's `x-next-token`.
    #[param(rename = "nextToken")]
    next_token: Option<String>,
}

/// The project's live sandboxes (running and paused), newest first, in keyset pages: the
/// `x-next-token` header names the next page. Environments' workspaces are not listed.
#[utoipa::path(
    get,
    path = "/sandbox/v1/v2/sandboxes",
    tag = "sandbox",
    operation_id = "sandbox-v2-list",
    params(ListParams),
    responses(
        (status = 200, description = "A page of sandboxes; `x-next-token` is set when more may follow.", body = Vec<wire::ListedSandbox>,
            headers(("x-next-token" = String, description = "Pass as `nextToken` to read the next page; absent on the last."))),
        (status = 400, description = "An unknown, repeated or invalid query parameter.", body = E2bError),
        (status = 401, description = "Missing, invalid or revoked API key.", body = E2bError),
        (status = 503, description = "Storage is unavailable.", body = E2bError),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: SandboxAuth,
    RawQuery(raw): RawQuery,
) -> Result<Response, SandboxError> {
    let query = Query::parse(raw.as_deref());
    if let Some(other) = query.names().find(|n| !["state", "metadata", "limit", "nextToken"].contains(n)) {
        return Err(SandboxError::UnknownQueryParameter(other.to_owned()));
    }
    let query = ListQuery::parse(
        query.single("state")?,
        query.single("metadata")?,
        query.single("limit")?,
        query.single("nextToken")?,
    )?;
    let project = &auth.0.project_id;
    let after = match &query.after {
        None => None,
        Some(id) => Some(cursor(&app, project, id).await?),
    };
    let (shown, next) = page(&app, project, &query, after, edge::now()).await?;
    let now = edge::now();
    let body: Vec<wire::ListedSandbox> =
        shown.iter().filter_map(|s| wire::ListedSandbox::at(s, now)).collect();
    let mut response = Json(body).into_response();
    if let Some(token) = next {
        let value = HeaderValue::from_str(&token).map_err(|_| SandboxError::Internal("next token"))?;
        response.headers_mut().insert("x-next-token", value);
    }
    Ok(response)
}

/// The sandbox a `nextToken` names: one of the project's, else the token is not ours.
async fn cursor(
    app: &App,
    project: &agentplane_domain::ProjectId,
    id: &SandboxId,
) -> Result<Sandbox, SandboxError> {
    match app.store.sandboxes().get(project, id).await {
        Ok(sandbox) => Ok(sandbox),
        Err(agentplane_store::StoreError::NotFound) => Err(agentplane_domain::ValidationError::new(
            "nextToken",
            "`nextToken` is not a token this API handed out",
        )
        .into()),
        Err(err) => Err(err.into()),
    }
}

/// The sandboxes `query` shows after `after`, and the token of the page that follows (when
/// more may).
async fn page(
    app: &App,
    project: &agentplane_domain::ProjectId,
    query: &ListQuery,
    mut after: Option<Sandbox>,
    now: Timestamp,
) -> Result<(Vec<Sandbox>, Option<String>), SandboxError> {
    let batch = PageLimit::new(STORE_PAGE).map_err(|_| SandboxError::Internal("page limit"))?;
    let mut shown = Vec::new();
    let mut examined = 0;
    loop {
        let found = app.store.sandboxes().page_after(project, after.as_ref(), batch).await?;
        for sandbox in found.items {
            examined += 1;
            if query.shows(&sandbox, now) {
                if shown.len() == query.limit {
                    // One more to show: the page is full and the next one starts after its last.
                    let next = shown.last().map(|s: &Sandbox| listing::next_token(&s.id));
                    return Ok((shown, next));
                }
                shown.push(sandbox.clone());
            }
            after = Some(sandbox);
        }
        if !found.has_more {
            return Ok((shown, None));
        }
        if examined >= MAX_EXAMINED {
            return Ok((shown, after.map(|s| listing::next_token(&s.id))));
        }
    }
}

/// Connect to a sandbox (E2B's `POST /v2/sandboxes/{id}/connect`): a paused one is resumed; a
/// `timeout` moves the deadline later (never earlier).
#[utoipa::path(
    post,
    path = "/sandbox/v1/v2/sandboxes/{sandbox_id}/connect",
    tag = "sandbox",
    operation_id = "sandbox-v2-connect",
    params(("sandbox_id" = String, Path, description = "The sandbox's `sandboxID`; an unknown, malformed or ended one is a 404.")),
    request_body = wire::ConnectSandbox,
    responses(
        (status = 200, description = "It was running; it runs.", body = wire::StartedSandbox),
        (status = 201, description = "It was paused; it runs again.", body = wire::StartedSandbox),
        (status = 400, description = "The body is not a valid request.", body = E2bError),
        (status = 401, description = "Missing, invalid or revoked API key.", body = E2bError),
        (status = 404, description = "No such sandbox in the project, or it has ended.", body = E2bError),
        (status = 409, description = "A session's managed compute or an environment's workspace, or it changed concurrently.", body = E2bError),
        (status = 500, description = "An internal error.", body = E2bError),
        (status = 503, description = "The node did not answer in time or refused, or storage is unavailable.", body = E2bError),
    ),
)]
pub async fn connect_v2(
    State(app): State<App>,
    auth: SandboxAuth,
    Path(id): Path<String>,
    Wire(body, _): Wire<wire::ConnectSandbox, SandboxError>,
) -> Result<(StatusCode, Json<wire::StartedSandbox>), SandboxError> {
    connect_to(&app, &auth, &id, &body).await
}

/// Connect to a sandbox (E2B's `POST /sandboxes/{id}/connect`): as its `/v2/` twin.
#[utoipa::path(
    post,
    path = "/sandbox/v1/sandboxes/{sandbox_id}/connect",
    tag = "sandbox",
    operation_id = "sandbox-connect",
    params(("sandbox_id" = String, Path, description = "The sandbox's `sandboxID`; an unknown, malformed or ended one is a 404.")),
    request_body = wire::ConnectSandbox,
    responses(
        (status = 200, description = "It was running; it runs.", body = wire::StartedSandbox),
        (status = 201, description = "It was paused; it runs again.", body = wire::StartedSandbox),
        (status = 400, description = "The body is not a valid request.", body = E2bError),
        (status = 401, description = "Missing, invalid or revoked API key.", body = E2bError),
        (status = 404, description = "No such sandbox in the project, or it has ended.", body = E2bError),
        (status = 409, description = "A session's managed compute or an environment's workspace, or it changed concurrently.", body = E2bError),
        (status = 500, description = "An internal error.", body = E2bError),
        (status = 503, description = "The node did not answer in time or refused, or storage is unavailable.", body = E2bError),
    ),
)]
pub async fn connect(
    State(app): State<App>,
    auth: SandboxAuth,
    Path(id): Path<String>,
    Wire(body, _): Wire<wire::ConnectSandbox, SandboxError>,
) -> Result<(StatusCode, Json<wire::StartedSandbox>), SandboxError> {
    connect_to(&app, &auth, &id, &body).await
}

async fn connect_to(
    app: &App,
    auth: &SandboxAuth,
    id: &str,
    body: &wire::ConnectSandbox,
) -> Result<(StatusCode, Json<wire::StartedSandbox>), SandboxError> {
    let timeout_s = body.timeout_s()?;
    let sandbox = load(app, auth, id).await?;
    lifecycle_is_ours(&sandbox)?;
    let (running, resumed) = sandboxes::connect(&app.store, &sandbox, timeout_s).await?;
    let token = envd_access_token(app, &running)?;
    let status = if resumed { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(wire::StartedSandbox::of(&running, token, e2b_domain()))))
}
