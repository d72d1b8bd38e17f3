//! [`SessionFiles`] over DynamoDB and S3.

use crate::{Objects, Store};
use agentplane_domain::bucket::BucketName;
use agentplane_domain::file::{FileId, SessionFile};
use agentplane_domain::{ProjectId, SessionId};

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::files::SessionFiles;

impl SessionFiles for Store {
    fn file_objects(&self, bucket: Option<&BucketName>) -> Result<Objects, PortError> {
        Ok(Store::file_objects(self, bucket)?)
    }

    async fn file(
        &self,
        project: &ProjectId,
        session: &SessionId,
        id: &FileId,
    ) -> Result<SessionFile, PortError> {
        Ok(self.files().get(project, session, id).await?)
    }

    async fn create_file(&self, file: &SessionFile, max_files: u32, max_bytes: u64) -> Result<(), PortError> {
        Ok(self.files().create_within(file, max_files, max_bytes).await?)
    }

    async fn stored_bytes(&self, project: &ProjectId) -> Result<u64, PortError> {
        Ok(self.files().stored_bytes(project).await?)
    }

    async fn delete_session_file(
        &self,
        project: &ProjectId,
        session: &SessionId,
        id: &FileId,
    ) -> Result<(), PortError> {
        Ok(self.files().delete(project, session, id).await?)
    }
}
