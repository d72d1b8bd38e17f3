//! Registering Document Store buckets to projects. A bucket is registered only if it is none of
//! the deployment's own buckets, its name matches the deployment's `DocumentBuckets` pattern
//! (what the functions' roles are granted), the project exists, the deployment's role reaches
//! the bucket, and no other project holds it (at most [`MAX_BUCKETS_PER_PROJECT`] a project).

use agentplane_domain::ProjectId;
use agentplane_domain::bucket::{BucketName, BucketPattern, DocumentBucket, MAX_BUCKETS_PER_PROJECT};

use crate::ports::PortError;
use crate::ports::buckets::{BucketRegistry, Reach, Refused};

/// Why a bucket was not registered (or a project's buckets not listed).
#[derive(Debug, thiserror::Error)]
pub enum BucketError {
    /// The bucket is one of the deployment's own.
    #[error("`{0}` is one of this deployment's own buckets")]
    OwnBucket(BucketName),
    /// The name does not match the deployment's `DocumentBuckets` pattern (named here).
    #[error("`{name}` does not match the DocumentBuckets pattern `{pattern}`")]
    NotAllowed { name: BucketName, pattern: String },
    #[error("project not found")]
    ProjectNotFound,
    /// No such bucket exists in the deployment's region.
    #[error("no bucket `{0}` exists in this region")]
    Missing(BucketName),
    /// The deployment's role may not use the bucket (or it is in another region).
    #[error("this deployment may not use `{0}`")]
    Forbidden(BucketName),
    /// The project has the bucket registered already.
    #[error("the project has `{0}` registered already")]
    Registered(BucketName),
    /// Another project holds the bucket.
    #[error("`{0}` is registered to another project")]
    Taken(BucketName),
    /// The project has as many buckets as it may.
    #[error("a project may register at most {MAX_BUCKETS_PER_PROJECT} buckets")]
    Full,
    #[error(transparent)]
    Port(PortError),
}

/// A missing project is `ProjectNotFound`; the rest is the port's.
fn project_found(err: PortError) -> BucketError {
    match err {
        PortError::NotFound => BucketError::ProjectNotFound,
        other => BucketError::Port(other),
    }
}

/// Which buckets the deployment lets a project register.
pub struct BucketRules<'a> {
    /// The deployment's own buckets (never a project's).
    pub own: [&'a str; 2],
    /// The deployment's `DocumentBuckets` pattern.
    pub pattern: &'a BucketPattern,
}

/// Registers the bucket `name` to `project`; the registration.
pub async fn register<S: BucketRegistry>(
    store: &S,
    rules: &BucketRules<'_>,
    project: ProjectId,
    name: BucketName,
) -> Result<DocumentBucket, BucketError> {
    if rules.own.contains(&name.as_str()) {
        return Err(BucketError::OwnBucket(name));
    }
    if !rules.pattern.matches(&name) {
        return Err(BucketError::NotAllowed { name, pattern: rules.pattern.as_str().to_owned() });
    }
    // The project first: an unknown project is not found whatever the bucket.
    store.bucket_project(&project).await.map_err(project_found)?;
    match store.bucket_reach(&name).await.map_err(BucketError::Port)? {
        Reach::Reachable => {}
        Reach::Missing => return Err(BucketError::Missing(name)),
        Reach::Forbidden => return Err(BucketError::Forbidden(name)),
    }
    let bucket = DocumentBucket { name, project_id: project, created_at: crate::now() };
    match store.register_bucket(&bucket, MAX_BUCKETS_PER_PROJECT).await.map_err(project_found)? {
        Ok(()) => Ok(bucket),
        Err(Refused::Registered) => Err(BucketError::Registered(bucket.name)),
        Err(Refused::Taken) => Err(BucketError::Taken(bucket.name)),
        Err(Refused::Full) => Err(BucketError::Full),
    }
}

/// The buckets registered to `project`, by name.
pub async fn list<S: BucketRegistry>(
    store: &S,
    project: &ProjectId,
) -> Result<Vec<DocumentBucket>, BucketError> {
    store.bucket_project(project).await.map_err(project_found)?;
    store.project_buckets(project).await.map_err(BucketError::Port)
}
