//! Document Store buckets: `POST|GET /core/v1/projects/{project_id}/buckets` and
//! `DELETE …/buckets/{bucket}`. An operator registers an S3 bucket of the deployment's account to
//! a project; the project's agents may then keep session files in it
//! (`config.attachments.bucket`). A bucket is registered only if its name matches the
//! deployment's `DocumentBuckets` pattern (what the functions' roles are granted), it is none of
//! the deployment's own buckets, the deployment's role reaches it (HeadBucket), and no other
//! project holds it.

use agentplane_domain::bucket::{BucketName, DocumentBucket};
use agentplane_domain::page::Page;
use agentplane_engine::buckets::{self, BucketRules};
use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::CoreAdmin;
use super::error::{CoreError, Found};
use super::project_id;
use crate::App;
use crate::body::Wire;
use crate::envelope::ErrorEnvelope;
use crate::list::List;

/// `POST /core/v1/projects/{project_id}/buckets`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterBucket {
    /// The S3 bucket's name (3 to 63 lowercase letters, digits, dots and hyphens), matching the
    /// deployment's `DocumentBuckets` pattern (default `agentplane-documents-*`).
    #[schema(min_length = 3, max_length = 63, pattern = "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")]
    pub name: String,
}

/// A Document Store bucket registered to a project.
#[derive(Debug, Serialize, ToSchema)]
pub struct BucketBody {
    /// Always `bucket`.
    #[schema(value_type = String, pattern = "^bucket$")]
    pub object: &'static str,
    /// The S3 bucket's name; agents name it in `config.attachments.bucket`.
    pub name: String,
    pub project_id: String,
    /// Unix seconds.
    pub created_at: i64,
}

impl From<&DocumentBucket> for BucketBody {
    fn from(bucket: &DocumentBucket) -> Self {
        Self {
            object: "bucket",
            name: bucket.name.to_string(),
            project_id: bucket.project_id.to_string(),
            created_at: bucket.created_at.unix_seconds(),
        }
    }
}

/// Register a Document Store bucket to a project.
///
/// The bucket must exist in the deployment's account and region, match the deployment's
/// `DocumentBuckets` pattern, be none of the deployment's own buckets and be held by no other
/// project. At most 10 per project. Agents of the project then name it in
/// `config.attachments.bucket`; their session files are kept there (under `files/`), and the
/// retention sweep deletes them after 30 days.
#[utoipa::path(
    post,
    path = "/core/v1/projects/{project_id}/buckets",
    tag = "core",
    operation_id = "core-buckets-register",
    params(("project_id" = String, Path, description = "The project; an unknown or malformed id answers 404.")),
    request_body = RegisterBucket,
    responses(
        (status = 201, description = "The bucket, registered.", body = BucketBody),
        (status = 400, description = "`name` is not an S3 bucket name or not one this deployment may use (`bucket_not_allowed`), or the deployment cannot reach the bucket (`bucket_unreachable`).", body = ErrorEnvelope),
        (status = 404, description = "No such project.", body = ErrorEnvelope),
        (status = 409, description = "The project has the bucket already (`bucket_already_registered`), another project holds it (`bucket_taken`), or the project has 10 (`bucket_limit_reached`).", body = ErrorEnvelope),
    ),
)]
pub async fn register(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path(project): Path<String>,
    Wire(body, _): Wire<RegisterBucket, CoreError>,
) -> Result<(StatusCode, Json<BucketBody>), CoreError> {
    let project_id = project_id(&project)?;
    let name = BucketName::parse("name", &body.name)?;
    let own = &app.store.names;
    let rules = BucketRules {
        own: [own.files_bucket.as_str(), own.workspaces_bucket.as_str()],
        pattern: &app.document_buckets,
    };
    let bucket = buckets::register(&app.store, &rules, project_id, name).await?;
    Ok((StatusCode::CREATED, Json(BucketBody::from(&bucket))))
}

/// List a project's Document Store buckets, by name (all of them: at most 10).
#[utoipa::path(
    get,
    path = "/core/v1/projects/{project_id}/buckets",
    tag = "core",
    operation_id = "core-buckets-list",
    params(("project_id" = String, Path, description = "The project; an unknown or malformed id answers 404.")),
    responses(
        (status = 200, description = "The project's buckets.", body = List<BucketBody>),
        (status = 404, description = "No such project.", body = ErrorEnvelope),
    ),
)]
pub async fn list(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path(project): Path<String>,
) -> Result<Json<List<BucketBody>>, CoreError> {
    let project_id = project_id(&project)?;
    let items = buckets::list(&app.store, &project_id).await?;
    let page = Page { items, has_more: false };
    Ok(Json(List::of(&page, |b| BucketBody::from(b), |b| b.name.to_string())))
}

/// Remove a Document Store bucket from a project.
///
/// Agents that name it take no new files afterwards (`bucket_not_registered`); files already
/// in it stay readable until they expire, and the retention sweep still deletes them there.
/// The bucket itself and its objects are never deleted.
#[utoipa::path(
    delete,
    path = "/core/v1/projects/{project_id}/buckets/{bucket}",
    tag = "core",
    operation_id = "core-buckets-remove",
    params(
        ("project_id" = String, Path, description = "The project."),
        ("bucket" = String, Path, description = "The bucket's name; one the project has not registered answers 404."),
    ),
    responses(
        (status = 204, description = "Removed."),
        (status = 404, description = "No such project, or the project has no such bucket.", body = ErrorEnvelope),
    ),
)]
pub async fn remove(
    State(app): State<App>,
    _admin: CoreAdmin,
    Path((project, bucket)): Path<(String, String)>,
) -> Result<StatusCode, CoreError> {
    let project_id = project_id(&project)?;
    let name = BucketName::parse("bucket", &bucket).map_err(|_| CoreError::NotFound("bucket"))?;
    app.store.buckets().delete(&project_id, &name).await.or_not_found(CoreError::NotFound("bucket"))?;
    Ok(StatusCode::NO_CONTENT)
}
