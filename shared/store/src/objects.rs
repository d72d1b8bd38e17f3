//! The one S3 module outside provisioning, on the files bucket: session transcripts too large
//! for a DynamoDB item (`transcripts/…`), and session files (`files/<project>/<session>/<file>`),
//! which clients upload and download themselves through presigned URLs. Only the functions
//! granted the files bucket build this client (`Store::with_objects`); every other function
//! holds DynamoDB alone.

use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;

use crate::StoreError;

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
}
