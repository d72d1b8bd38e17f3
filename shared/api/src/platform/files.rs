//! `/v1/environments/{environmentId}/files`: the environment's workspace files, named by a
//! canonical absolute path under `/workspace` in the `path` query parameter (so a path never
//! mixes with route segments). The path rules are the domain's (`platform::path`); symlinks are
//! refused by the node, which never follows one.

use agentplane_domain::platform::path::{PathError, WorkspacePath};
use agentplane_domain::query::Query;
use agentplane_engine::platform::files;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::{IntoParams, ToSchema};

use super::auth::PlatformAuth;
use super::error::{PlatformError, PlatformErrorEnvelope};
use super::platform;
use super::wire::Data;
use crate::App;

/// The largest file this route reads or writes (the node's command queue carries it).
pub use agentplane_engine::platform::MAX_FILE_BYTES;

#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct FileParams {
    /// A canonical absolute path under `/workspace` (`/workspace/src/main.rs`).
    #[param(min_length = 12, max_length = 4095, pattern = "^/workspace(/[^/]+)+$")]
    path: String,
}

#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ReadParams {
    /// A file to read (its raw bytes); absent: the workspace's regular files are listed.
    #[param(min_length = 12, max_length = 4095, pattern = "^/workspace(/[^/]+)+$")]
    path: Option<String>,
}

/// A regular workspace file.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileBody {
    /// Canonical absolute path inside /workspace.
    pub path: String,
    #[schema(minimum = 0)]
    pub size: u64,
    #[schema(pattern = "^[a-f0-9]{64}$")]
    pub sha256: String,
}

/// The workspace's regular files (`.git` and protected state left out, symlinks not followed),
/// by path; `hasMore` when there were more than 1,000.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileList {
    pub data: Vec<FileBody>,
    pub has_more: bool,
}

/// The `path` parameter (and no other).
fn path_param(raw: Option<&str>, required: bool) -> Result<Option<WorkspacePath>, PlatformError> {
    let query = Query::parse(raw);
    if let Some(other) = query.names().find(|n| *n != "path") {
        let other = crate::edge::quote::quote(other);
        return Err(PlatformError::invalid(other.clone(), format!("unknown query parameter `{other}`")));
    }
    match query.single("path")? {
        Some(text) => Ok(Some(WorkspacePath::parse(text).map_err(PlatformError::InvalidPath)?)),
        None if required => Err(PlatformError::invalid("path", "`path` is required")),
        None => Ok(None),
    }
}

/// Write a workspace file.
#[utoipa::path(
    put,
    path = "/v1/environments/{environmentId}/files",
    tag = "platform",
    operation_id = "platform-files-put",
    params(("environmentId" = String, Path, min_length = 1, description = "The environment's id."), FileParams),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The file's bytes (at most 256 KiB)."),
    responses(
        (status = 200, description = "The file as written.", body = Data<FileBody>),
        (status = 400, description = "`path` is invalid (`invalid_path`: outside /workspace, not canonical, Git metadata, protected state, a symlink or non-regular file on the way).", body = PlatformErrorEnvelope),
        (status = 414, description = "The request target (with its percent-encoded `path`) exceeds 8 KiB (`uri_too_long`).", body = PlatformErrorEnvelope),
        (status = 404, description = "No such environment (`environment_not_found`).", body = PlatformErrorEnvelope),
        (status = 409, description = "A rollback of the environment is still under way after the operation waited for it (up to 10 s; `rollback_in_progress`).", body = PlatformErrorEnvelope),
        (status = 413, description = "The file is larger than 256 KiB.", body = PlatformErrorEnvelope),
        (status = 503, description = "The workspace's sandbox cannot be reached (`platform_runtime_unavailable`), or storage is unavailable.", body = PlatformErrorEnvelope),
    ),
)]
pub async fn put(
    State(app): State<App>,
    auth: PlatformAuth,
    Path(environment): Path<String>,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Result<Json<Data<FileBody>>, PlatformError> {
    let environment = super::environments::load(&app, &auth, &environment).await?;
    let path = path_param(raw.as_deref(), true)?
        .ok_or_else(|| PlatformError::invalid("path", "`path` is required"))?;
    if body.len() > MAX_FILE_BYTES {
        return Err(PlatformError::FileTooLarge);
    }
    files::write(&platform(&app), app.platform_limits.file_wait, environment, &path, &body).await?;
    let sha256 = hex_sha256(&body);
    Ok(Data::of(FileBody { path: path.absolute(), size: body.len() as u64, sha256 }))
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Read a workspace file, or list the workspace's files.
#[utoipa::path(
    get,
    path = "/v1/environments/{environmentId}/files",
    tag = "platform",
    operation_id = "platform-files-get",
    params(("environmentId" = String, Path, min_length = 1, description = "The environment's id."), ReadParams),
    responses(
        (status = 200, description = "With `path`: the file's raw bytes. Without: the workspace's regular files.", content(
            (FileList = "application/json"),
            (Vec<u8> = "application/octet-stream"),
        )),
        (status = 400, description = "`path` is invalid (`invalid_path`).", body = PlatformErrorEnvelope),
        (status = 414, description = "The request target (with its percent-encoded `path`) exceeds 8 KiB (`uri_too_long`).", body = PlatformErrorEnvelope),
        (status = 404, description = "No such environment (`environment_not_found`) or file (`file_not_found`).", body = PlatformErrorEnvelope),
        (status = 409, description = "The listing met one of the node's caps on the workspace tree (`workspace_too_large`, `details: {cap, limit}`; cap `depth`, `entries`, `path_bytes`, `listing_bytes` or `file_bytes`), or a rollback of the environment is still under way after the operation waited for it (up to 10 s; `rollback_in_progress`).", body = PlatformErrorEnvelope),
        (status = 503, description = "The workspace's sandbox cannot be reached (`platform_runtime_unavailable`), or storage is unavailable.", body = PlatformErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: PlatformAuth,
    Path(environment): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, PlatformError> {
    let environment = super::environments::load(&app, &auth, &environment).await?;
    let path = path_param(raw.as_deref(), false)?;
    let platform = platform(&app);
    let wait = app.platform_limits.file_wait;
    match path {
        Some(path) => {
            let bytes = files::read(&platform, wait, environment, &path).await?;
            let content_type = HeaderValue::from_static("application/octet-stream");
            Ok(([(header::CONTENT_TYPE, content_type)], bytes).into_response())
        }
        None => {
            let listing = files::list(&platform, wait, environment).await?;
            let data = listing
                .entries
                .into_iter()
                .map(|e| FileBody { path: format!("/workspace/{}", e.path), size: e.size, sha256: e.sha256 })
                .collect();
            Ok(Json(FileList { data, has_more: listing.has_more }).into_response())
        }
    }
}

/// Delete a workspace file.
#[utoipa::path(
    delete,
    path = "/v1/environments/{environmentId}/files",
    tag = "platform",
    operation_id = "platform-files-delete",
    params(("environmentId" = String, Path, min_length = 1, description = "The environment's id."), FileParams),
    responses(
        (status = 204, description = "The file is gone."),
        (status = 400, description = "`path` is invalid (`invalid_path`), or names a directory or symlink.", body = PlatformErrorEnvelope),
        (status = 414, description = "The request target (with its percent-encoded `path`) exceeds 8 KiB (`uri_too_long`).", body = PlatformErrorEnvelope),
        (status = 404, description = "No such environment (`environment_not_found`) or file (`file_not_found`).", body = PlatformErrorEnvelope),
        (status = 409, description = "A rollback of the environment is still under way after the operation waited for it (up to 10 s; `rollback_in_progress`).", body = PlatformErrorEnvelope),
        (status = 503, description = "The workspace's sandbox cannot be reached (`platform_runtime_unavailable`), or storage is unavailable.", body = PlatformErrorEnvelope),
    ),
)]
pub async fn delete(
    State(app): State<App>,
    auth: PlatformAuth,
    Path(environment): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<StatusCode, PlatformError> {
    let environment = super::environments::load(&app, &auth, &environment).await?;
    let path = path_param(raw.as_deref(), true)?
        .ok_or_else(|| PlatformError::invalid("path", "`path` is required"))?;
    files::delete(&platform(&app), app.platform_limits.file_wait, environment, &path).await?;
    Ok(StatusCode::NO_CONTENT)
}

impl From<PathError> for PlatformError {
    fn from(err: PathError) -> Self {
        Self::InvalidPath(err)
    }
}
