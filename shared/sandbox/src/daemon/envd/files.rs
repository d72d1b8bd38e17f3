//! `GET /files` (download one file) and `POST /files` (upload: `multipart/form-data`, one part
//! per file, or `application/octet-stream` for one), `path` and `username` in the query. Errors
//! in envd's HTTP shape, `{"code": <status>, "message"}`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

use super::{Node, admit, paths};
use crate::local::workspace::{self, DEFAULT_MODE};

/// The largest file uploaded or downloaded through envd.
pub const MAX_FILE_BYTES: usize = 64 * 1024 * 1024;

/// A refused `/files` request.
#[derive(Debug, thiserror::Error)]
pub(super) enum FilesError {
    #[error("{0}")]
    Status(StatusCode, String),
}

impl IntoResponse for FilesError {
    fn into_response(self) -> Response {
        let Self::Status(status, message) = self;
        let body = serde_json::json!({ "code": status.as_u16(), "message": message });
        (status, [(header::CACHE_CONTROL, "no-store")], axum::Json(body)).into_response()
    }
}

impl From<super::connect::ConnectError> for FilesError {
    fn from(err: super::connect::ConnectError) -> Self {
        let status = match err.code {
            super::connect::Code::PermissionDenied | super::connect::Code::InvalidArgument => {
                StatusCode::BAD_REQUEST
            }
            other => other.status(),
        };
        Self::Status(status, err.message)
    }
}

fn query_path(raw: Option<&str>) -> Option<String> {
    form_urlencoded::parse(raw.unwrap_or("").as_bytes())
        .find(|(k, _)| k == "path")
        .map(|(_, v)| v.into_owned())
}

pub(super) async fn download(
    State(node): State<Arc<Node>>,
    RawQuery(raw): RawQuery,
    headers: http::HeaderMap,
) -> Result<Response, FilesError> {
    let admitted = admit(&node, &headers)
        .await
        .map_err(|r| FilesError::Status(StatusCode::UNAUTHORIZED, r.to_string()))?;
    let path = query_path(raw.as_deref()).ok_or_else(|| bad("`path` is required"))?;
    let relative = paths::relative(&path)?;
    let (root, _) = admitted.sandbox.workspace();
    let bytes = tokio::task::spawn_blocking(move || workspace::read_within(&root, &relative, MAX_FILE_BYTES))
        .await
        .map_err(|e| FilesError::Status(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(|f| FilesError::from(paths::failure(f)))?;
    let mut response = Response::new(axum::body::Body::from(bytes));
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

fn bad(message: &str) -> FilesError {
    FilesError::Status(StatusCode::BAD_REQUEST, message.to_owned())
}

pub(super) async fn upload(
    State(node): State<Arc<Node>>,
    RawQuery(raw): RawQuery,
    headers: http::HeaderMap,
    body: Bytes,
) -> Result<Response, FilesError> {
    let admitted = admit(&node, &headers)
        .await
        .map_err(|r| FilesError::Status(StatusCode::UNAUTHORIZED, r.to_string()))?;
    let path = query_path(raw.as_deref());
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let files: Vec<(String, Vec<u8>)> = if content_type.starts_with("multipart/form-data") {
        let boundary = boundary(content_type).ok_or_else(|| bad("the multipart body names no boundary"))?;
        let parts = multipart(&body, &boundary).ok_or_else(|| bad("the multipart body is malformed"))?;
        let single = parts.len() == 1;
        parts
            .into_iter()
            .map(|(filename, data)| match (&path, single) {
                (Some(p), true) => Ok((p.clone(), data)),
                _ => filename.map(|f| (f, data)).ok_or_else(|| bad("a part names no file")),
            })
            .collect::<Result<_, _>>()?
    } else if headers.get(header::CONTENT_ENCODING).is_some() {
        return Err(bad("compressed uploads are not served"));
    } else {
        vec![(path.ok_or_else(|| bad("`path` is required"))?, body.to_vec())]
    };
    let (root, uid) = admitted.sandbox.workspace();
    let mut written = Vec::new();
    for (path, data) in files {
        let relative = paths::relative(&path)?;
        let (root, rel) = (root.clone(), relative.clone());
        tokio::task::spawn_blocking(move || {
            workspace::write_within(&root, uid, &rel, &data, MAX_FILE_BYTES, DEFAULT_MODE)
        })
        .await
        .map_err(|e| FilesError::Status(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(|f| FilesError::from(paths::failure(f)))?;
        let name = relative.rsplit('/').next().unwrap_or_default().to_owned();
        written.push(serde_json::json!({ "name": name, "type": "file", "path": paths::absolute(&relative) }));
    }
    Ok((StatusCode::OK, [(header::CACHE_CONTROL, "no-store")], axum::Json(written)).into_response())
}

fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').find_map(|p| {
        let value = p.trim().strip_prefix("boundary=")?;
        Some(value.trim_matches('"').to_owned()).filter(|b| !b.is_empty() && b.len() <= 200)
    })
}

/// The parts of a `multipart/form-data` body: (filename, bytes) each.
fn multipart(body: &[u8], boundary: &str) -> Option<Vec<(Option<String>, Vec<u8>)>> {
    let delimiter = format!("--{boundary}").into_bytes();
    let mut parts = Vec::new();
    let mut rest = &body[find(body, &delimiter)? + delimiter.len()..];
    loop {
        if rest.starts_with(b"--") {
            return Some(parts);
        }
        rest = rest.strip_prefix(b"\r\n")?;
        let head_end = find(rest, b"\r\n\r\n")?;
        let head = std::str::from_utf8(&rest[..head_end]).ok()?;
        let content = &rest[head_end + 4..];
        let mut next = delimiter.clone();
        next.splice(0..0, *b"\r\n");
        let end = find(content, &next)?;
        parts.push((filename(head), content[..end].to_vec()));
        rest = &content[end + next.len()..];
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn filename(head: &str) -> Option<String> {
    head.lines()
        .find(|l| l.to_ascii_lowercase().starts_with("content-disposition:"))?
        .split(';')
        .find_map(|p| p.trim().strip_prefix("filename=").map(|f| f.trim_matches('"').to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multipart_body_yields_its_files() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/workspace/a.txt\"\r\nContent-Type: application/octet-stream\r\n\r\nhello\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b\"\r\n\r\n\r\n--XyZ--\r\n";
        let parts = multipart(body, "XyZ").expect("parts");
        assert_eq!(
            parts,
            vec![(Some("/workspace/a.txt".into()), b"hello".to_vec()), (Some("b".into()), Vec::new())]
        );
        assert_eq!(boundary("multipart/form-data; boundary=\"XyZ\"").as_deref(), Some("XyZ"));
        assert!(multipart(b"--XyZ\r\nbroken", "XyZ").is_none());
    }
}
