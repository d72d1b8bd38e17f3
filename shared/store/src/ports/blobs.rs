//! [`Blobs`] and [`Buckets`] over S3.

use std::time::Duration;

use crate::{Objects, Store};
use agentplane_domain::Timestamp;

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::blobs::{Blobs, Buckets, Listed};

impl Blobs for Objects {
    async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), PortError> {
        Ok(Objects::put(self, key, body).await?)
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, PortError> {
        Ok(Objects::get(self, key).await?)
    }

    async fn delete(&self, key: &str) -> Result<(), PortError> {
        Ok(Objects::delete(self, key).await?)
    }

    async fn delete_many(&self, keys: &[String]) -> Result<usize, PortError> {
        Ok(Objects::delete_many(self, keys).await?)
    }

    async fn list_page(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Listed>, bool), PortError> {
        Ok(Objects::list_page(self, prefix, after, limit).await?)
    }

    async fn written_at(&self, key: &str) -> Result<Option<Timestamp>, PortError> {
        Ok(Objects::written_at(self, key).await?)
    }

    async fn refresh(&self, key: &str, content_type: &str) -> Result<bool, PortError> {
        Ok(Objects::refresh(self, key, content_type).await?)
    }

    async fn presign_get(&self, key: &str, expires: Duration) -> Result<String, PortError> {
        Ok(Objects::presign_get(self, key, expires).await?)
    }

    async fn presign_put(
        &self,
        key: &str,
        content_type: &str,
        size: u64,
        expires: Duration,
    ) -> Result<String, PortError> {
        Ok(Objects::presign_put(self, key, content_type, size, expires).await?)
    }

    async fn presign_put_any(&self, key: &str, expires: Duration) -> Result<String, PortError> {
        Ok(Objects::presign_put_any(self, key, expires).await?)
    }
}

impl Buckets for Store {
    type Blobs = Objects;

    fn workspaces(&self) -> Result<&Objects, PortError> {
        Ok(Store::workspaces(self)?)
    }

    fn objects(&self) -> Result<&Objects, PortError> {
        Ok(Store::objects(self)?)
    }
}
