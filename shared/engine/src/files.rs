//! A session's files: one is created `pending` with a presigned URL that takes its bytes, only
//! when the version the session runs takes files and within its limits (how many a session
//! keeps, how large each is), in the Document Store bucket its config names (still registered
//! to the project) or the deployment's files bucket; one is deleted with its bytes.

use std::time::Duration;

use agentplane_domain::ValidationError;
use agentplane_domain::agent::{Attachments, Channel};
use agentplane_domain::bucket::BucketName;
use agentplane_domain::file::{FileId, NewFile, SessionFile, UPLOAD_URL_SECONDS};
use agentplane_domain::session::Session;
use agentplane_domain::{ProjectId, SessionId};

use crate::ports::PortError;
use crate::ports::blobs::Blobs;
use crate::ports::files::SessionFiles;

/// Why a file was not created or deleted.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// The project has no such live session.
    #[error("session not found")]
    SessionNotFound,
    /// The session has no such file.
    #[error("file not found")]
    FileNotFound,
    /// The session's agent is gone.
    #[error("agent not found")]
    AgentNotFound,
    /// The session runs its agent's published version, and it has none.
    #[error("the agent has no published version")]
    AgentNotPublished,
    /// The session takes no files (why, for the client).
    #[error("{0}")]
    AttachmentsNotEnabled(String),
    /// The body, or the bucket the config names, is invalid (names the parameter).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The config's bucket is not registered to the project (any more).
    #[error("bucket `{0}` is not registered")]
    BucketNotRegistered(String),
    /// The session has `max_files` files already.
    #[error("the session has {max_files} files already")]
    FileLimitReached { max_files: u32 },
    /// The project stores `stored` bytes of files; this file's `size` would pass `max`.
    #[error("the project's stored bytes would pass {max}")]
    StoredBytesQuota { max: u64, stored: u64, size: u64 },
    #[error("no randomness for an id")]
    Randomness,
    #[error(transparent)]
    Port(PortError),
}

impl From<PortError> for FilesError {
    fn from(err: PortError) -> Self {
        Self::Port(err)
    }
}

/// A read where a missing thing is the caller's `missing`.
fn or<T>(result: Result<T, PortError>, missing: FilesError) -> Result<T, FilesError> {
    match result {
        Ok(value) => Ok(value),
        Err(PortError::NotFound) => Err(missing),
        Err(err) => Err(FilesError::Port(err)),
    }
}

/// A new file and the presigned `PUT` that takes its bytes.
#[derive(Debug, Clone)]
pub struct Created {
    pub file: SessionFile,
    pub upload_url: String,
}

/// Creates a file in the live session `session_id` of `project`: `ask` reads what is asked for
/// within the attachment settings of the version the session runs (once they are known to
/// take files).
pub async fn create<S: SessionFiles>(
    store: &S,
    project: ProjectId,
    session_id: &SessionId,
    max_stored_bytes: u64,
    ask: impl FnOnce(&Attachments) -> Result<NewFile, ValidationError>,
) -> Result<Created, FilesError> {
    let session = or(store.live_session(&project, session_id).await, FilesError::SessionNotFound)?;
    let limits = attachments(store, &project, &session).await?;
    let new = ask(&limits)?;
    let bucket = registered_bucket(store, &project, &limits).await?;
    let id = FileId::from_random(crate::random::secret().map_err(|_| FilesError::Randomness)?);
    let mut file = new.into_file(id, project, session.id, crate::now());
    file.bucket = bucket;
    let objects = store.file_objects(file.bucket.as_ref())?;
    let upload_url = objects
        .presign_put(
            &file.object_key(),
            &file.content_type,
            file.size,
            Duration::from_secs(UPLOAD_URL_SECONDS),
        )
        .await?;
    match store.create_file(&file, limits.max_files, max_stored_bytes).await {
        Ok(()) => {}
        Err(PortError::Conflict) => {
            // Which cap: the project's bytes when this file would pass them, else the session's count.
            let stored = store.stored_bytes(&project).await?;
            if stored.saturating_add(file.size) > max_stored_bytes {
                return Err(FilesError::StoredBytesQuota { max: max_stored_bytes, stored, size: file.size });
            }
            return Err(FilesError::FileLimitReached { max_files: limits.max_files });
        }
        Err(err) => return Err(FilesError::Port(err)),
    }
    Ok(Created { file, upload_url })
}

/// The attachment settings of the version the session runs (its agent's draft, or the
/// published version once it ran that), or why it takes no files.
async fn attachments<S: SessionFiles>(
    store: &S,
    project: &ProjectId,
    session: &Session,
) -> Result<Attachments, FilesError> {
    let Some(agent_id) = session.agent_id else {
        return Err(FilesError::AttachmentsNotEnabled(
            "the session has no agent yet, so it takes no files: create it with `agent_id` (an agent whose \
             `config.attachments.enabled` is true), or run a turn first"
                .into(),
        ));
    };
    let agent = or(store.agent(project, &agent_id).await, FilesError::AgentNotFound)?;
    let channel = session.agent_channel.unwrap_or(Channel::Draft);
    let (config, _) =
        store.agent_config(&agent, channel, None).await?.ok_or(FilesError::AgentNotPublished)?;
    if !config.attachments.enabled {
        let which = match channel {
            Channel::Draft => "draft",
            Channel::Published => "published version",
        };
        return Err(FilesError::AttachmentsNotEnabled(format!(
            "this session's agent takes no files: its {which}'s `config.attachments.enabled` is false"
        )));
    }
    Ok(config.attachments)
}

/// The Document Store bucket the agent's config names, if the project still has it registered;
/// `None`: the deployment's files bucket.
async fn registered_bucket<S: SessionFiles>(
    store: &S,
    project: &ProjectId,
    limits: &Attachments,
) -> Result<Option<BucketName>, FilesError> {
    let Some(name) = limits.bucket_name()? else { return Ok(None) };
    or(store.registered_bucket(project, &name).await, FilesError::BucketNotRegistered(name.to_string()))?;
    Ok(Some(name))
}

/// Deletes the file `id` of the live session `session_id` of `project`, its bytes first (a
/// failure there leaves the file in place to delete again). `id` is `None` when the path's file
/// id is malformed: it names no file (`FileNotFound`, once the session is known to be there).
/// The id of the file deleted.
pub async fn delete<S: SessionFiles>(
    store: &S,
    project: ProjectId,
    session_id: &SessionId,
    id: Option<FileId>,
) -> Result<FileId, FilesError> {
    let session = or(store.live_session(&project, session_id).await, FilesError::SessionNotFound)?;
    let id = id.ok_or(FilesError::FileNotFound)?;
    let file = or(store.file(&project, &session.id, &id).await, FilesError::FileNotFound)?;
    // The bytes first: a failure here leaves the file in place to delete again.
    store.file_objects(file.bucket.as_ref())?.delete(&file.object_key()).await?;
    or(store.delete_session_file(&project, &session.id, &id).await, FilesError::FileNotFound)?;
    Ok(id)
}
