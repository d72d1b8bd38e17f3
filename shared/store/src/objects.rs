//! The one S3 module outside provisioning, on the files bucket: session transcripts too large
//! for a DynamoDB item (`transcripts/…`), and session files (`files/<project>/<session>/<file>`),
//! which clients upload and download themselves through presigned URLs. Only the functions
//! granted the files bucket build this client (`Store::with_objects`); every other function
//! holds DynamoDB alone. The same type is the client of the workspaces bucket (checkpoint blobs
//! and manifests), with the listing, batch delete and refresh its retention needs.

use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;

use agentplane_domain::Timestamp;
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::types::{Delete, MetadataDirective, ObjectIdentifier};

use crate::StoreError;

pub use agentplane_engine::ports::blobs::{DELETE_BATCH, Listed};

fn written(at: Option<&aws_sdk_s3::primitives::DateTime>) -> Timestamp {
    // An object without a date is taken as written now-ish (the far future): never old enough.
    at.and_then(|t| t.to_millis().ok())
        .map_or(Timestamp::from_unix_millis(i64::MAX), Timestamp::from_unix_millis)
}

/// Whether the deployment's role reaches a bucket (the engine's port type).
pub use agentplane_engine::ports::buckets::Reach;

/// An S3 client bound to the bucket it may use.
#[derive(Clone, Debug)]
pub struct Objects {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl Objects {
    /// Records every request of this client in `counter` (bench and tests only).
    pub(crate) fn count_ops(&mut self, counter: &crate::metrics::OpCounter) {
        let config = self.client.config().to_builder().interceptor(counter.interceptor()).build();
        self.client = aws_sdk_s3::Client::from_conf(config);
    }

    /// Path-style addressing against an emulator (`bucket.localhost` does not resolve).
    pub fn new(sdk: &SdkConfig, bucket: String) -> Self {
        let config =
            aws_sdk_s3::config::Builder::from(sdk).force_path_style(sdk.endpoint_url().is_some()).build();
        Self { client: aws_sdk_s3::Client::from_conf(config), bucket }
    }

    pub async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), StoreError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("application/json")
            .body(ByteStream::from(body))
            .send()
            .await
            .map_err(|e| StoreError::unavailable(DisplayErrorContext(e)))?;
        Ok(())
    }

    /// The object's bytes; `NotFound` when there is none.
    pub async fn get(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        let out = self.client.get_object().bucket(&self.bucket).key(key).send().await.map_err(|e| {
            if e.as_service_error().is_some_and(|e| e.is_no_such_key()) {
                StoreError::NotFound
            } else {
                StoreError::unavailable(DisplayErrorContext(e))
            }
        })?;
        let bytes = out.body.collect().await.map_err(StoreError::unavailable)?;
        Ok(bytes.into_bytes().to_vec())
    }

    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| StoreError::unavailable(DisplayErrorContext(e)))?;
        Ok(())
    }

    /// A presigned PUT of `key` that S3 accepts only with exactly this `Content-Type` and
    /// `Content-Length` (both are signed headers), for `expires`.
    pub async fn presign_put(
        &self,
        key: &str,
        content_type: &str,
        size: u64,
        expires: Duration,
    ) -> Result<String, StoreError> {
        let config = PresigningConfig::expires_in(expires).map_err(StoreError::unavailable)?;
        let length = i64::try_from(size).map_err(StoreError::unavailable)?;
        let request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .content_length(length)
            .presigned(config)
            .await
            .map_err(|e| StoreError::unavailable(DisplayErrorContext(e)))?;
        Ok(request.uri().to_owned())
    }

    /// A presigned PUT of `key` of any size and type (a node's scan listing, whose size is not
    /// known in advance), for `expires`.
    pub async fn presign_put_any(&self, key: &str, expires: Duration) -> Result<String, StoreError> {
        let config = PresigningConfig::expires_in(expires).map_err(StoreError::unavailable)?;
        let request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(config)
            .await
            .map_err(|e| StoreError::unavailable(DisplayErrorContext(e)))?;
        Ok(request.uri().to_owned())
    }

    /// The keys under `prefix`, all pages (tests and the bench count objects with it).
    pub async fn keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|e| StoreError::unavailable(DisplayErrorContext(e)))?;
            keys.extend(out.contents().iter().filter_map(|o| o.key().map(str::to_owned)));
            match out.next_continuation_token() {
                Some(next) => token = Some(next.to_owned()),
                None => return Ok(keys),
            }
        }
    }

    /// A presigned GET of `key`, for `expires`.
    pub async fn presign_get(&self, key: &str, expires: Duration) -> Result<String, StoreError> {
        let config = PresigningConfig::expires_in(expires).map_err(StoreError::unavailable)?;
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(config)
            .await
            .map_err(|e| StoreError::unavailable(DisplayErrorContext(e)))?;
        Ok(request.uri().to_owned())
    }

    /// The object's size in bytes, from the bucket itself; `None` when there is no object.
    pub async fn size(&self, key: &str) -> Result<Option<u64>, StoreError> {
        match self.client.head_object().bucket(&self.bucket).key(key).send().await {
            Ok(out) => Ok(out.content_length().and_then(|n| u64::try_from(n).ok())),
            Err(e) if e.as_service_error().is_some_and(|e| e.is_not_found()) => Ok(None),
            Err(e) => Err(StoreError::unavailable(DisplayErrorContext(e))),
        }
    }

    /// The same client on another bucket (a Document Store bucket a project registered).
    pub fn in_bucket(&self, bucket: &str) -> Objects {
        Objects { client: self.client.clone(), bucket: bucket.to_owned() }
    }

    /// Whether the bucket is there for this role (HeadBucket): a missing bucket and one the role
    /// may not use are answers, not errors.
    pub async fn reach(&self) -> Result<Reach, StoreError> {
        match self.client.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) => Ok(Reach::Reachable),
            Err(e) if e.as_service_error().is_some_and(|e| e.is_not_found()) => Ok(Reach::Missing),
            Err(e) => match e.raw_response().map(|r| r.status().as_u16()) {
                Some(404) => Ok(Reach::Missing),
                // 403: the role may not use it; 301: it is in another region than the deployment.
                Some(403 | 301) => Ok(Reach::Forbidden),
                _ => Err(StoreError::unavailable(DisplayErrorContext(e))),
            },
        }
    }

    /// The first `limit` bytes of the object (a range read); `NotFound` when there is none.
    pub async fn get_prefix(&self, key: &str, limit: u64) -> Result<Vec<u8>, StoreError> {
        let range = format!("bytes=0-{}", limit.saturating_sub(1));
        let out = self.client.get_object().bucket(&self.bucket).key(key).range(range).send().await.map_err(
            |e| {
                if e.as_service_error().is_some_and(|e| e.is_no_such_key()) {
                    StoreError::NotFound
                } else {
                    StoreError::unavailable(DisplayErrorContext(e))
                }
            },
        )?;
        let bytes = out.body.collect().await.map_err(StoreError::unavailable)?;
        Ok(bytes.into_bytes().to_vec())
    }

    /// One page of at most `limit` keys under `prefix` after the key `after`, in key order, each
    /// with when it was last written; the second value is whether more keys follow. One
    /// ListObjectsV2; a listing that answers fewer keys than asked for with more to come is
    /// followed with its continuation token until the page is full.
    pub async fn list_page(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Listed>, bool), StoreError> {
        let mut listed = Vec::with_capacity(limit.min(DELETE_BATCH));
        let mut token: Option<String> = None;
        loop {
            let want = i32::try_from(limit - listed.len()).unwrap_or(1_000).clamp(1, 1_000);
            let out = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_start_after(if token.is_none() { after.map(str::to_owned) } else { None })
                .set_continuation_token(token.take())
                .max_keys(want)
                .send()
                .await
                .map_err(|e| StoreError::unavailable(DisplayErrorContext(e)))?;
            listed.extend(out.contents().iter().filter_map(|o| {
                Some(Listed { key: o.key()?.to_owned(), written: written(o.last_modified()) })
            }));
            match out.next_continuation_token() {
                Some(next) if listed.len() < limit => token = Some(next.to_owned()),
                Some(_) => return Ok((listed, true)),
                None => return Ok((listed, false)),
            }
        }
    }

    /// Deletes `keys`, [`DELETE_BATCH`] a DeleteObjects; answers how many S3 reported deleted
    /// (a key already gone counts: S3 reports it deleted). Keys S3 failed are logged and left.
    pub async fn delete_many(&self, keys: &[String]) -> Result<usize, StoreError> {
        let mut deleted = 0;
        for chunk in keys.chunks(DELETE_BATCH) {
            let objects = chunk
                .iter()
                .map(|k| ObjectIdentifier::builder().key(k).build().map_err(StoreError::unavailable))
                .collect::<Result<Vec<_>, _>>()?;
            let delete = Delete::builder()
                .set_objects(Some(objects))
                .quiet(true)
                .build()
                .map_err(StoreError::unavailable)?;
            let out = self
                .client
                .delete_objects()
                .bucket(&self.bucket)
                .delete(delete)
                .send()
                .await
                .map_err(|e| StoreError::unavailable(DisplayErrorContext(e)))?;
            for err in out.errors() {
                tracing::warn!(key = ?err.key(), code = ?err.code(), "S3 did not delete an object");
            }
            deleted += chunk.len().saturating_sub(out.errors().len());
        }
        Ok(deleted)
    }

    /// When the object was last written; `None` when there is none (one HEAD).
    pub async fn written_at(&self, key: &str) -> Result<Option<Timestamp>, StoreError> {
        match self.client.head_object().bucket(&self.bucket).key(key).send().await {
            Ok(out) => Ok(Some(written(out.last_modified()))),
            Err(e) if e.as_service_error().is_some_and(|e| e.is_not_found()) => Ok(None),
            Err(e) => Err(StoreError::unavailable(DisplayErrorContext(e))),
        }
    }

    /// Rewrites the object in place (a server-side copy onto itself), so it reads as written
    /// now and the same bytes stay; `false` when there is no object. One CopyObject.
    pub async fn refresh(&self, key: &str, content_type: &str) -> Result<bool, StoreError> {
        let result = self
            .client
            .copy_object()
            .bucket(&self.bucket)
            .key(key)
            .copy_source(format!("{}/{key}", self.bucket))
            .metadata_directive(MetadataDirective::Replace)
            .content_type(content_type)
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().and_then(|e| e.code()) == Some("NoSuchKey") => Ok(false),
            Err(e) => Err(StoreError::unavailable(DisplayErrorContext(e))),
        }
    }
}
