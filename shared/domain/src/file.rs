//! Session files: a document or image attached to a session. The bytes never pass through the
//! API: the client uploads them straight to the files bucket with a presigned PUT whose size and
//! content type are fixed, and reads them back with a presigned GET. A file is `pending` until
//! the object is there with exactly the declared size (checked against the bucket, never taken
//! from the client), then `ready`, once, by a conditional write.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::Attachments;
use crate::bucket::BucketName;
use crate::ids::InvalidId;
use crate::{ProjectId, SessionId, Timestamp, ValidationError};

crate::webhook::hex_id!(
    /// A session file: `file_` and 24 lowercase hex characters.
    FileId,
    "file_",
    "file"
);

/// How long a file (its item and its object) is kept.
pub const RETENTION_DAYS: i64 = 30;
/// How long an upload URL works.
pub const UPLOAD_URL_SECONDS: u64 = 15 * 60;
/// How long a download URL works.
pub const DOWNLOAD_URL_SECONDS: u64 = 5 * 60;
pub const MAX_FILENAME_CHARS: usize = 255;
pub const MAX_CONTENT_TYPE_CHARS: usize = 127;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    /// Created; the object is not (or not yet with the declared size) in the bucket.
    Pending,
    /// The object is in the bucket with the declared size.
    Ready,
}

impl FileStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Ready => "ready",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionFile {
    pub id: FileId,
    pub project_id: ProjectId,
    pub session_id: SessionId,
    pub filename: String,
    pub content_type: String,
    /// Bytes, as declared at creation and fixed in the upload URL.
    pub size: u64,
    pub status: FileStatus,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    /// The Document Store bucket the file is kept in (the agent's `config.attachments.bucket`
    /// when it was created); `None`: the deployment's files bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<BucketName>,
}

impl SessionFile {
    /// The object's key in the files bucket.
    pub fn object_key(&self) -> String {
        object_key(&self.project_id, &self.session_id, &self.id)
    }

    /// Whether a model may be given the file's text.
    pub fn is_text(&self) -> bool {
        is_text_type(&self.content_type)
    }

    pub fn is_image(&self) -> bool {
        self.content_type.starts_with("image/")
    }
}

/// `files/<project>/<session>/<file>`: every key of a project's files shares its prefix, and the
/// bucket's lifecycle rule on `files/` expires them.
pub fn object_key(project: &ProjectId, session: &SessionId, file: &FileId) -> String {
    format!("files/{project}/{session}/{file}")
}

/// `text/*` and JSON.
pub fn is_text_type(content_type: &str) -> bool {
    let base = content_type.split(';').next().unwrap_or_default().trim();
    base.starts_with("text/") || base == "application/json" || base.ends_with("+json")
}

/// What a create request asks for, validated against the running config's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    pub filename: String,
    pub content_type: String,
    pub size: u64,
}

impl NewFile {
    /// `filename`, `content_type` and `size` as a create body gave them (`None`: absent or
    /// `null`), checked in that order and against the agent's `limits`.
    pub fn new(
        filename: Option<&Value>,
        content_type: Option<&Value>,
        size: Option<&Value>,
        limits: &Attachments,
    ) -> Result<Self, ValidationError> {
        let filename = match filename {
            Some(Value::String(name)) => name.clone(),
            None | Some(Value::Null) => {
                return Err(ValidationError::new("filename", "`filename` is required"));
            }
            Some(_) => return Err(ValidationError::new("filename", "`filename` must be a string")),
        };
        if filename.trim().is_empty()
            || filename.chars().count() > MAX_FILENAME_CHARS
            || filename.chars().any(|c| c.is_control() || c == '/' || c == '\\')
        {
            return Err(ValidationError::new(
                "filename",
                format!(
                    "`filename` must be 1 to {MAX_FILENAME_CHARS} characters, without control characters or slashes"
                ),
            ));
        }
        let content_type = match content_type {
            Some(Value::String(t)) => t.clone(),
            None | Some(Value::Null) => {
                return Err(ValidationError::new("content_type", "`content_type` is required"));
            }
            Some(_) => return Err(ValidationError::new("content_type", "`content_type` must be a string")),
        };
        if !valid_content_type(&content_type) {
            return Err(ValidationError::new(
                "content_type",
                "`content_type` must be a media type such as `text/plain` or `image/png`",
            ));
        }
        let size = match size {
            Some(Value::Number(n)) => n.as_u64().filter(|s| *s > 0),
            None | Some(Value::Null) => return Err(ValidationError::new("size", "`size` is required")),
            Some(_) => None,
        }
        .ok_or_else(|| ValidationError::new("size", "`size` must be a positive integer (bytes)"))?;
        if size > limits.max_file_bytes {
            return Err(ValidationError::new(
                "size",
                format!(
                    "`size` may be at most {} bytes (this agent's `config.attachments.max_file_bytes`)",
                    limits.max_file_bytes
                ),
            ));
        }
        Ok(Self { filename, content_type, size })
    }

    pub fn into_file(
        self,
        id: FileId,
        project_id: ProjectId,
        session_id: SessionId,
        now: Timestamp,
    ) -> SessionFile {
        SessionFile {
            id,
            project_id,
            session_id,
            filename: self.filename,
            content_type: self.content_type,
            size: self.size,
            status: FileStatus::Pending,
            created_at: now,
            expires_at: now.plus_seconds(RETENTION_DAYS * 86_400),
            bucket: None,
        }
    }
}

/// `type/subtype`, both RFC 7230 tokens, lowercase or not; no parameters (the type is signed
/// into the upload URL and must match the PUT's header exactly).
fn valid_content_type(text: &str) -> bool {
    let token =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b));
    text.len() <= MAX_CONTENT_TYPE_CHARS && text.split_once('/').is_some_and(|(t, s)| token(t) && token(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn file_ids_are_file_and_24_hex() {
        let id = FileId::from_random([0xcd; 12]);
        assert_eq!(id.as_str(), "file_cdcdcdcdcdcdcdcdcdcdcdcd");
        assert_eq!(id.as_str().parse::<FileId>(), Ok(id));
        for bad in ["file_", "file_CDCDCDCDCDCDCDCDCDCDCDCD", "act_cdcdcdcdcdcdcdcdcdcdcdcd", ""] {
            assert!(bad.parse::<FileId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_create_body_is_checked_against_the_limits() {
        let limits = Attachments { enabled: true, max_file_bytes: 100, ..Attachments::default() };
        let new = |body: Value| {
            let field = |name: &str| body.get(name).filter(|v| !v.is_null());
            NewFile::new(field("filename"), field("content_type"), field("size"), &limits)
        };
        let ok = new(json!({"filename": "a.txt", "content_type": "text/plain", "size": 100}));
        assert_eq!(ok.map(|f| f.size), Ok(100));
        for (bad, param) in [
            (json!({"content_type": "text/plain", "size": 1}), "filename"),
            (json!({"filename": "", "content_type": "text/plain", "size": 1}), "filename"),
            (json!({"filename": "a/b", "content_type": "text/plain", "size": 1}), "filename"),
            (json!({"filename": 5, "content_type": "text/plain", "size": 1}), "filename"),
            (json!({"filename": "a", "content_type": "text", "size": 1}), "content_type"),
            (
                json!({"filename": "a", "content_type": "text/plain; charset=utf-8", "size": 1}),
                "content_type",
            ),
            (json!({"filename": "a", "size": 1}), "content_type"),
            (json!({"filename": "a", "content_type": "text/plain", "size": 0}), "size"),
            (json!({"filename": "a", "content_type": "text/plain", "size": 1.5}), "size"),
            (json!({"filename": "a", "content_type": "text/plain", "size": "1"}), "size"),
            (json!({"filename": "a", "content_type": "text/plain", "size": 101}), "size"),
            (json!({"filename": "a", "content_type": "text/plain"}), "size"),
        ] {
            let err = new(bad.clone()).err();
            assert_eq!(err.and_then(|e| e.param), Some(param.to_owned()), "{bad}");
        }
    }

    #[test]
    fn keys_and_kinds() {
        let project = ProjectId::from_random([1; 16]);
        let session = SessionId::from_random([2; 16]);
        let new = NewFile { filename: "a.png".into(), content_type: "image/png".into(), size: 3 };
        let file =
            new.into_file(FileId::from_random([3; 12]), project, session, Timestamp::from_unix_seconds(10));
        assert_eq!(file.object_key(), format!("files/{project}/{session}/file_030303030303030303030303"));
        assert_eq!(file.expires_at, Timestamp::from_unix_seconds(10 + 30 * 86_400));
        assert!(file.is_image() && !file.is_text());
        assert!(is_text_type("application/json") && is_text_type("text/csv") && !is_text_type("image/png"));
    }
}
