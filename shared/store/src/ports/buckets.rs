//! [`BucketRegistry`] over DynamoDB and S3.

use crate::Store;
use agentplane_domain::ProjectId;
use agentplane_domain::bucket::{BucketName, DocumentBucket};
use agentplane_domain::project::Project;

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::buckets::{BucketRegistry, Reach, Refused};

impl BucketRegistry for Store {
    async fn bucket_project(&self, id: &ProjectId) -> Result<Project, PortError> {
        Ok(self.projects().get(id).await?)
    }

    async fn bucket_reach(&self, name: &BucketName) -> Result<Reach, PortError> {
        Ok(self.file_objects(Some(name))?.reach().await?)
    }

    async fn register_bucket(
        &self,
        bucket: &DocumentBucket,
        max: u32,
    ) -> Result<Result<(), Refused>, PortError> {
        Ok(self.buckets().create(bucket, max).await?)
    }

    async fn project_buckets(&self, project: &ProjectId) -> Result<Vec<DocumentBucket>, PortError> {
        Ok(self.buckets().list(project).await?)
    }
}
