//! The one S3 use outside provisioning: session transcripts too large for a DynamoDB item, in
//! the files bucket under `transcripts/`. Only the functions that run turns build this client
//! (`Store::with_objects`); every other function holds DynamoDB alone.

use aws_config::SdkConfig;
use aws_sdk_s3::error::DisplayErrorContext;
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
}
