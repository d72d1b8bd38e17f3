//! `view_image` in the deployment: the model names an image file of its session and is shown
//! it by a short-lived presigned GET (the engine puts it in the next model call). Errors are
//! what the model is told; none says more than "not in this session" about other sessions.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use agentplane_domain::file::{FileId, FileStatus};
use agentplane_domain::{ProjectId, SessionId};
use agentplane_engine::images::{ImageSource, ViewedImage};
use agentplane_store::{Store, StoreError};
use serde_json::json;

use super::input::{IMAGE_URL_SECONDS, reads_images};

/// The session images of a store with the files bucket.
#[derive(Debug, Clone)]
pub struct SessionImages {
    store: Store,
}

impl SessionImages {
    /// `None` when the store has no files bucket (a function not granted it): no `view_image`.
    pub fn of(store: &Store) -> Option<Self> {
        store.objects().is_ok().then(|| Self { store: store.clone() })
    }

    async fn show(
        &self,
        project: &ProjectId,
        session: &SessionId,
        file_id: &str,
    ) -> Result<ViewedImage, String> {
        let missing = || format!("no file `{file_id}` in this session");
        let unreadable = |err: StoreError| {
            tracing::warn!(error = %err, "view_image could not read a file");
            "the file could not be read just now; try again".to_owned()
        };
        let id: FileId = file_id.parse().map_err(|_| missing())?;
        let file = match self.store.files().get(project, session, &id).await {
            Ok(file) => file,
            Err(StoreError::NotFound) => return Err(missing()),
            Err(err) => return Err(unreadable(err)),
        };
        let file = match super::settle::settle_in(&self.store, file).await {
            Ok(file) => file,
            Err(StoreError::NotFound) => return Err(missing()),
            Err(err) => return Err(unreadable(err)),
        };
        if !file.is_image() {
            return Err(format!("`{id}` is not an image ({})", file.content_type));
        }
        if file.status != FileStatus::Ready {
            return Err(format!("the file `{id}` is not uploaded yet"));
        }
        let url = self
            .store
            .file_objects(file.bucket.as_ref())
            .map_err(unreadable)?
            .presign_get(&file.object_key(), Duration::from_secs(IMAGE_URL_SECONDS))
            .await
            .map_err(unreadable)?;
        let about = json!({
            "file_id": id.to_string(),
            "filename": file.filename,
            "content_type": file.content_type,
            "size": file.size,
            "shown": "in your next step",
        });
        Ok(ViewedImage { url, about })
    }
}

impl ImageSource for SessionImages {
    fn reads_images(&self, model: &str) -> bool {
        reads_images(model)
    }

    fn view<'a>(
        &'a self,
        project: &'a ProjectId,
        session: &'a SessionId,
        file_id: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<ViewedImage, String>> + Send + 'a>> {
        Box::pin(self.show(project, session, file_id))
    }
}
