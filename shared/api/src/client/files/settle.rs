//! A session file becomes `ready` once its bytes are in the bucket: asked of the bucket when the
//! file is read (its route, a turn that names it, the image tool), never taken from the client.

use agentplane_domain::file::{FileStatus, SessionFile};
use agentplane_store::StoreError;

use crate::App;
use crate::client::error::{ClientError, Found};

/// A pending file whose object is in the bucket with exactly its declared size (asked of the
/// bucket, never taken from the client) becomes `ready`, once, by a conditional write.
pub async fn settle(app: &App, file: SessionFile) -> Result<SessionFile, ClientError> {
    settle_in(&app.store, file).await.or_not_found(ClientError::FileNotFound)
}

/// [`settle`] on `store`; `NotFound` when the file was deleted meanwhile.
pub async fn settle_in(
    store: &agentplane_store::Store,
    mut file: SessionFile,
) -> Result<SessionFile, StoreError> {
    if file.status != FileStatus::Pending {
        return Ok(file);
    }
    let size = store.file_objects(file.bucket.as_ref())?.size(&file.object_key()).await?;
    if size != Some(file.size) {
        return Ok(file);
    }
    match store.files().mark_ready(&file).await {
        Ok(()) => file.status = FileStatus::Ready,
        // Another read marked it first, or it was deleted meanwhile: read what is there now.
        Err(StoreError::Conflict) => {
            file = store.files().get(&file.project_id, &file.session_id, &file.id).await?;
        }
        Err(err) => return Err(err),
    }
    Ok(file)
}
