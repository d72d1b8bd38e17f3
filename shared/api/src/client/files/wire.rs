//! The session file object as the client API shows it (snake_case, Unix seconds).

use agentplane_domain::ValidationError;
use agentplane_domain::agent::Attachments;
use agentplane_domain::file::{FileStatus, NewFile, SessionFile};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// Where a file is: `pending` until its object is in the bucket with the declared size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = SessionFileStatus)]
pub enum FileStatusName {
    Pending,
    Ready,
}

impl From<FileStatus> for FileStatusName {
    fn from(status: FileStatus) -> Self {
        match status {
            FileStatus::Pending => Self::Pending,
            FileStatus::Ready => Self::Ready,
        }
    }
}

/// Create a session file: what will be uploaded.
// Read as given (`null` reads as absent) and checked once the session's limits are known, by
// `validate`: a field of the wrong type, or one this body does not take, answers 400 naming it.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = CreateSessionFile)]
pub struct CreateFile {
    /// 1–255 characters, no control characters or slashes.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub filename: Option<Value>,
    /// A media type (`type/subtype`, no parameters); the upload must send exactly this
    /// `Content-Type`.
    #[schema(
        value_type = String,
        required = true,
        max_length = 127,
        pattern = "^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+$"
    )]
    pub content_type: Option<Value>,
    /// Bytes; at most the agent's `config.attachments.max_file_bytes` (default 20 MB). The upload
    /// must be exactly this long.
    #[schema(value_type = u64, required = true, minimum = 1)]
    pub size: Option<Value>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub other: Map<String, Value>,
}

impl CreateFile {
    /// The file asked for, within the session's agent's `limits`.
    pub fn validate(self, limits: &Attachments) -> Result<NewFile, ValidationError> {
        crate::body::no_other_field(&self.other)?;
        NewFile::new(self.filename.as_ref(), self.content_type.as_ref(), self.size.as_ref(), limits)
    }
}

/// A session file.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = SessionFile)]
pub struct FileBody {
    /// `file_` and 24 hex characters.
    #[schema(pattern = "^file_[0-9a-f]{24}$")]
    pub id: String,
    /// Always `session_file`.
    #[schema(pattern = "^session_file$")]
    pub object: &'static str,
    pub session_id: String,
    pub status: FileStatusName,
    pub filename: String,
    pub content_type: String,
    pub size: u64,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds: the file (and its bytes) are deleted then.
    pub expires_at: i64,
    /// Only in the answer to create: a presigned `PUT` (15 minutes) that takes exactly
    /// `size` bytes with `Content-Type: <content_type>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upload_url: Option<String>,
    /// Only when the file is `ready`, on get: a presigned `GET` of its bytes (5 minutes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub download_url: Option<String>,
}

impl From<&SessionFile> for FileBody {
    fn from(file: &SessionFile) -> Self {
        Self {
            id: file.id.to_string(),
            object: "session_file",
            session_id: file.session_id.to_string(),
            status: file.status.into(),
            filename: file.filename.clone(),
            content_type: file.content_type.clone(),
            size: file.size,
            created_at: file.created_at.unix_seconds(),
            expires_at: file.expires_at.unix_seconds(),
            upload_url: None,
            download_url: None,
        }
    }
}

/// The file is deleted.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SessionFileDeleted)]
pub struct FileDeleted {
    pub id: String,
    /// Always `session_file.deleted`.
    #[schema(value_type = String, pattern = "^session_file\\.deleted$")]
    pub object: &'static str,
    /// Always `true`.
    pub deleted: bool,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A body as the route reads it: the `Wire` extractor, then the check against `limits`.
    fn read(body: Value) -> Result<NewFile, (Option<String>, String)> {
        let limits = Attachments { enabled: true, max_file_bytes: 100, ..Attachments::default() };
        let Value::Object(map) = body else { panic!("an object") };
        let body: CreateFile = crate::body::from_object(map).expect("reading never fails");
        body.validate(&limits).map_err(|e| (e.param, e.message))
    }

    #[test]
    fn a_file_body_is_refused_by_field_as_the_map_was() {
        assert_eq!(
            read(json!({"filename": "a.txt", "content_type": "text/plain", "size": 100})),
            Ok(NewFile { filename: "a.txt".into(), content_type: "text/plain".into(), size: 100 })
        );
        let refused = |param: &str, message: &str| Err((Some(param.to_owned()), message.to_owned()));
        assert_eq!(
            read(json!({"filename": null, "content_type": "text/plain", "size": 1})),
            refused("filename", "`filename` is required")
        );
        assert_eq!(
            read(json!({"filename": 5, "content_type": "text/plain", "size": 1})),
            refused("filename", "`filename` must be a string")
        );
        assert_eq!(
            read(json!({"filename": "a", "content_type": "text/plain", "size": "1"})),
            refused("size", "`size` must be a positive integer (bytes)")
        );
        assert_eq!(
            read(json!({"filename": "a", "content_type": "text/plain", "size": 1, "bucket": "x", "acl": 1})),
            refused("acl", "unknown field `acl`")
        );
        assert_eq!(read(json!({"zzz": 1})), refused("zzz", "unknown field `zzz`"));
    }
}
