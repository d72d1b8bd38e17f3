//! `filesystem.Filesystem`: the sandbox's `/workspace` as a file browser sees it, through the
//! workspace module's no-follow walk (the node acts as root on the host, so nothing here may
//! resolve a path the sandbox controls).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};

use super::connect::{self, Code, ConnectError};
use super::messages::{EntryInfo, EntryResponse, ListDirResponse, MoveRequest, PathRequest};
use super::{Node, admit, paths};
use crate::local::workspace::{self, Failure, entries};

/// The most entries one listing answers.
const MAX_LIST: usize = workspace::MAX_LIST_ENTRIES;

pub(super) async fn call(
    State(node): State<Arc<Node>>,
    Path(method): Path<String>,
    headers: http::HeaderMap,
    body: Bytes,
) -> Response {
    let admitted = match admit(&node, &headers).await {
        Ok(a) => a,
        Err(refused) => return ConnectError::from(refused).into_response(),
    };
    let (root, uid) = admitted.sandbox.workspace();
    let answer = match method.as_str() {
        "Stat" | "ListDir" | "MakeDir" | "Remove" => {
            match connect::unary_request::<PathRequest>(&headers, &body) {
                Ok(request) => path_call(method.as_str(), root, uid, &request).await,
                Err(err) => Err(err),
            }
        }
        "Move" => match connect::unary_request::<MoveRequest>(&headers, &body) {
            Ok(request) => moved(root, uid, &request).await,
            Err(err) => Err(err),
        },
        "WatchDir" | "CreateWatcher" | "GetWatcherEvents" | "RemoveWatcher" => {
            Err(ConnectError::new(Code::Unimplemented, "directory watches are not served"))
        }
        _ => Err(ConnectError::new(
            Code::Unimplemented,
            format!("filesystem.Filesystem/{method} is not served"),
        )),
    };
    answer.unwrap_or_else(IntoResponse::into_response)
}

async fn blocking<T: Send + 'static>(
    op: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, ConnectError> {
    match tokio::task::spawn_blocking(op).await {
        Ok(result) => result.map_err(paths::failure),
        Err(err) => Err(ConnectError::new(Code::Internal, format!("the operation failed: {err}"))),
    }
}

async fn path_call(
    method: &str,
    root: std::path::PathBuf,
    uid: u32,
    request: &PathRequest,
) -> Result<Response, ConnectError> {
    let relative = paths::relative(&request.path)?;
    match method {
        "Stat" => {
            let info = blocking(move || entries::stat(&root, &relative)).await?;
            Ok(connect::unary_response(&EntryResponse { entry: entry_info(&info) }))
        }
        "ListDir" => {
            if request.depth.unwrap_or(1) > 1 {
                return Err(ConnectError::new(Code::InvalidArgument, "listings go one level deep"));
            }
            let (list, _more) = blocking(move || entries::list_dir(&root, &relative, MAX_LIST)).await?;
            Ok(connect::unary_response(&ListDirResponse { entries: list.iter().map(entry_info).collect() }))
        }
        "MakeDir" => {
            let (root2, rel2) = (root.clone(), relative.clone());
            if !blocking(move || entries::make_dir(&root, uid, &relative)).await? {
                return Err(ConnectError::new(Code::AlreadyExists, "the directory already exists"));
            }
            let info = blocking(move || entries::stat(&root2, &rel2)).await?;
            Ok(connect::unary_response(&EntryResponse { entry: entry_info(&info) }))
        }
        _ => {
            blocking(move || entries::remove(&root, &relative)).await?;
            Ok(connect::unary_response(&super::messages::Empty {}))
        }
    }
}

async fn moved(root: std::path::PathBuf, uid: u32, request: &MoveRequest) -> Result<Response, ConnectError> {
    let (from, to) = (paths::relative(&request.source)?, paths::relative(&request.destination)?);
    let info = blocking(move || {
        entries::rename(&root, uid, &from, &to)?;
        entries::stat(&root, &to)
    })
    .await?;
    Ok(connect::unary_response(&EntryResponse { entry: entry_info(&info) }))
}

/// An entry as envd describes it.
pub(super) fn entry_info(info: &entries::Info) -> EntryInfo {
    let kind = match info.kind {
        entries::Kind::File => "FILE_TYPE_FILE",
        entries::Kind::Directory => "FILE_TYPE_DIRECTORY",
        entries::Kind::Symlink => "FILE_TYPE_SYMLINK",
        entries::Kind::Other => "FILE_TYPE_UNSPECIFIED",
    };
    EntryInfo {
        name: if info.name.is_empty() { "workspace".into() } else { info.name.clone() },
        kind,
        path: paths::absolute(&info.path),
        size: info.size,
        mode: info.mode,
        permissions: permissions(info.kind, info.mode),
        owner: "user".into(),
        group: "user".into(),
        modified_time: rfc3339(info.modified),
    }
}

fn permissions(kind: entries::Kind, mode: u32) -> String {
    let first = match kind {
        entries::Kind::Directory => 'd',
        entries::Kind::Symlink => 'l',
        _ => '-',
    };
    let bits = (0..9).rev().map(|i| if mode & (1 << i) != 0 { ['x', 'w', 'r'][i % 3] } else { '-' });
    std::iter::once(first).chain(bits).collect()
}

fn rfc3339(unix_seconds: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix_seconds)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_read_like_ls() {
        assert_eq!(permissions(entries::Kind::File, 0o644), "-rw-r--r--");
        assert_eq!(permissions(entries::Kind::Directory, 0o755), "drwxr-xr-x");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    }
}
