//! What registering a Document Store bucket to a project reads and writes: the project, whether
//! the deployment reaches the bucket, and the registrations (one project per bucket, a capped
//! number per project).

use std::future::Future;

use agentplane_domain::ProjectId;
use agentplane_domain::bucket::{BucketName, DocumentBucket};
use agentplane_domain::project::Project;

use super::PortError;

/// Whether the deployment's role reaches a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    Reachable,
    /// No such bucket exists in the deployment's region.
    Missing,
    /// Access is denied, or the bucket is in another region.
    Forbidden,
}

/// Why a registration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The project has this bucket registered already.
    Registered,
    /// Another project holds the bucket.
    Taken,
    /// The project has its `max` buckets.
    Full,
}

/// Document Store buckets and the projects they are registered to.
pub trait BucketRegistry: Send + Sync {
    /// The project `id`; `NotFound` when there is none.
    fn bucket_project(&self, id: &ProjectId) -> impl Future<Output = Result<Project, PortError>> + Send;

    /// Whether the deployment's role reaches the bucket `name` (HeadBucket).
    fn bucket_reach(&self, name: &BucketName) -> impl Future<Output = Result<Reach, PortError>> + Send;

    /// Registers `bucket` to its project, at most `max` per project; `Ok(Err(_))` says why it
    /// was refused. `NotFound` when the project does not exist.
    fn register_bucket(
        &self,
        bucket: &DocumentBucket,
        max: u32,
    ) -> impl Future<Output = Result<Result<(), Refused>, PortError>> + Send;

    /// The buckets registered to `project`, by name.
    fn project_buckets(
        &self,
        project: &ProjectId,
    ) -> impl Future<Output = Result<Vec<DocumentBucket>, PortError>> + Send;
}
