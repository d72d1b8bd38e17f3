use std::time::Duration;

use agentplane_domain::file::{DOWNLOAD_URL_SECONDS, FileId, FileStatus};
use agentplane_domain::page::PageRequest;
use agentplane_domain::query::Query;
use agentplane_domain::session::Session;
use agentplane_domain::{ProjectId, SessionId};
use agentplane_engine::files;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use http::StatusCode;

use super::wire::{CreateFile, FileBody, FileDeleted};
use crate::App;
use crate::body::Wire;
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found};
use crate::envelope::ErrorEnvelope;
use crate::list::{List, PageParams};

/// The live session of the caller's project named by the path; a malformed id, another
/// project's or a deleted session is `session_not_found`.
async fn session(app: &App, project: &ProjectId, text: &str) -> Result<Session, ClientError> {
    let id = session_id_of(text)?;
    app.store.sessions().get(project, &id).await.or_not_found(ClientError::SessionNotFound)
}

/// A malformed session id is indistinguishable from a missing session.
fn session_id_of(text: &str) -> Result<SessionId, ClientError> {
    text.parse().map_err(|_| ClientError::SessionNotFound)
}

/// A malformed file id is indistinguishable from a missing file.
fn file_id(text: &str) -> Result<FileId, ClientError> {
    text.parse().map_err(|_| ClientError::FileNotFound)
}

/// Create a session file: the answer's `upload_url` takes the bytes.
///
/// The file is `pending` until its bytes are uploaded: `PUT` exactly `size` bytes to
/// `upload_url` with the header `Content-Type: <content_type>` (both are signed into the URL,
/// which works for 15 minutes). Reading the file afterwards finds it `ready`. Only when the
/// version the session runs has `config.attachments.enabled`; at most `max_files` files per
/// session and `max_file_bytes` each (defaults 10 and 20 MB). Files are kept 30 days.
#[utoipa::path(
    post,
    path = "/api/client/v1/sessions/{session_id}/files",
    tag = "client",
    operation_id = "client-session-files-create",
    params(("session_id" = String, Path, description = "The session's id.")),
    request_body(content = CreateFile, description = "What will be uploaded."),
    responses(
        (status = 201, description = "The new file, `pending`, with its `upload_url`.", body = FileBody),
        (status = 400, description = "The body is invalid (`param` names the field; `size` above `max_file_bytes` too), or the session's agent takes no files (`attachments_not_enabled`).", body = ErrorEnvelope),
        (status = 404, description = "No such session in this project (`session_not_found`), or its agent is gone (`agent_not_found`).", body = ErrorEnvelope),
        (status = 409, description = "The session has `max_files` files already (`file_limit_reached`, with `max_files`), its agent has no published version (`agent_not_published`), or its agent's `config.attachments.bucket` is not registered to the project (any more) (`bucket_not_registered`), or the file's `size` would take the project's stored bytes past its quota (`quota_exceeded`, with `quota: \"stored_bytes\"`, `max`, `stored`; deleting files gives bytes back).", body = ErrorEnvelope),
    ),
)]
pub async fn create(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(session_id): Path<String>,
    Wire(body, _): Wire<CreateFile, ClientError>,
) -> Result<(StatusCode, Json<FileBody>), ClientError> {
    let session_id = session_id_of(&session_id)?;
    let created = files::create(&app.store, auth.project_id, &session_id, app.caps.stored_bytes, |limits| {
        body.validate(limits)
    })
    .await?;
    let mut answer = FileBody::from(&created.file);
    answer.upload_url = Some(created.upload_url);
    Ok((StatusCode::CREATED, Json(answer)))
}

/// List a session's files, newest first.
///
/// Each file's `status` is as last recorded: a file uploaded since is `ready` once read by
/// itself (get).
#[utoipa::path(
    get,
    path = "/api/client/v1/sessions/{session_id}/files",
    tag = "client",
    operation_id = "client-session-files-list",
    params(("session_id" = String, Path, description = "The session's id."), PageParams),
    responses(
        (status = 200, description = "A page of the session's files.", body = List<FileBody>),
        (status = 400, description = "A page parameter is invalid (`param` names it).", body = ErrorEnvelope),
        (status = 404, description = "No such session in this project (`session_not_found`), or `after` names no file of it (`cursor_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(session_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<List<FileBody>>, ClientError> {
    let page = PageRequest::from_query(&Query::parse(raw.as_deref()))?;
    let session = session(&app, &auth.project_id, &session_id).await?;
    let after = match &page.after {
        Some(text) => Some(text.parse::<FileId>().map_err(|_| ClientError::CursorNotFound)?),
        None => None,
    };
    let found = app
        .store
        .files()
        .list(&auth.project_id, &session.id, &page, after.as_ref())
        .await
        .or_not_found(ClientError::CursorNotFound)?;
    Ok(Json(List::of(&found, |f| FileBody::from(f), |f| f.id.to_string())))
}

/// Retrieve a session file; a ready one carries a `download_url`.
///
/// A `pending` file whose bytes were uploaded with the declared size turns `ready` here. A
/// ready file's `download_url` is a presigned `GET` that works for 5 minutes.
#[utoipa::path(
    get,
    path = "/api/client/v1/sessions/{session_id}/files/{file_id}",
    tag = "client",
    operation_id = "client-session-files-get",
    params(
        ("session_id" = String, Path, description = "The session's id."),
        ("file_id" = String, Path, description = "The file's id (`file_…`)."),
    ),
    responses(
        (status = 200, description = "The file.", body = FileBody),
        (status = 404, description = "No such session in this project (`session_not_found`), or no such file in the session (`file_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn get(
    State(app): State<App>,
    auth: ProjectAuth,
    Path((session_id, id)): Path<(String, String)>,
) -> Result<Json<FileBody>, ClientError> {
    let session = session(&app, &auth.project_id, &session_id).await?;
    let id = file_id(&id)?;
    let file = app
        .store
        .files()
        .get(&auth.project_id, &session.id, &id)
        .await
        .or_not_found(ClientError::FileNotFound)?;
    let file = super::settle::settle(&app, file).await?;
    let mut answer = FileBody::from(&file);
    if file.status == FileStatus::Ready {
        let url = app
            .store
            .file_objects(file.bucket.as_ref())?
            .presign_get(&file.object_key(), Duration::from_secs(DOWNLOAD_URL_SECONDS))
            .await?;
        answer.download_url = Some(url);
    }
    Ok(Json(answer))
}

/// Delete a session file and its bytes.
#[utoipa::path(
    delete,
    path = "/api/client/v1/sessions/{session_id}/files/{file_id}",
    tag = "client",
    operation_id = "client-session-files-delete",
    params(
        ("session_id" = String, Path, description = "The session's id."),
        ("file_id" = String, Path, description = "The file's id (`file_…`)."),
    ),
    responses(
        (status = 200, description = "The file is deleted.", body = FileDeleted),
        (status = 404, description = "No such session in this project (`session_not_found`), or no such file in the session (`file_not_found`).", body = ErrorEnvelope),
    ),
)]
pub async fn delete(
    State(app): State<App>,
    auth: ProjectAuth,
    Path((session_id, id)): Path<(String, String)>,
) -> Result<Json<FileDeleted>, ClientError> {
    let session_id = session_id_of(&session_id)?;
    // A malformed file id names no file: `file_not_found` once the session is known.
    let id = files::delete(&app.store, auth.project_id, &session_id, file_id(&id).ok()).await?;
    Ok(Json(FileDeleted { id: id.to_string(), object: "session_file.deleted", deleted: true }))
}
