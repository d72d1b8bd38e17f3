//! What a deleted session leaves behind, and its removal (the engine's `session_purge` drives
//! it; every step is idempotent).
//!
//! A delete moves the session item's GSI2 (`by_due`) keys from the list of live sessions to
//! `SESSIONS_PURGE` / `{deleted ms:015}#{pid}#{sid}` in the same write, so the retention sweep
//! finds every deleted session not yet purged; the purge's last step takes it out again.
//!
//! | what                     | where                                                         |
//! |--------------------------|---------------------------------------------------------------|
//! | transcript, files, count, actions | main: `PROJECT#{pid}` / `SESSION#{sid}#…`            |
//! | feedback (+ its locator) | main: `PROJECT#{pid}` / `FEEDBACK#{sid}#…` (`FEEDBACKID#{id}`) |
//! | events                   | events: `SESSION#{sid}` / seq                                  |
//! | transcript bodies, file bytes | files bucket: `transcripts/{pid}/{sid}/`, `files/{pid}/{sid}/` (a file of a Document Store bucket: its own key there) |

use agentplane_domain::bucket::BucketName;
use agentplane_domain::file::SessionFile;
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, WriteRequest};
use serde::Deserialize;

use super::keys::{project_pk, session_sk};
use super::{batch_write, conditional, due_page, query_all, s};
use crate::{Store, StoreError};

/// The `by_due` partition of deleted sessions waiting for their purge.
pub const SESSIONS_PURGE: &str = "SESSIONS_PURGE";

/// The purge queue's sort key of a session deleted at `deleted_at`.
pub fn purge_sort_key(deleted_at: Timestamp, project: &ProjectId, session: &SessionId) -> String {
    format!("{:015}#{project}#{session}", deleted_at.unix_millis().max(0))
}

pub use agentplane_engine::ports::sweeps::PurgeDue;

/// The purge queue's entry of a deleted session.
#[derive(Deserialize)]
struct PurgeDueItem {
    project_id: ProjectId,
    id: SessionId,
}

pub use agentplane_engine::ports::sweeps::OwnedItem;

#[derive(Deserialize)]
struct RawOwned {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(default)]
    file: Option<SessionFile>,
    #[serde(default)]
    feedback: Option<FeedbackRef>,
}

#[derive(Deserialize)]
struct FeedbackRef {
    id: String,
}

#[derive(Deserialize)]
struct EventKey {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: u64,
}

pub struct SessionPurge<'a> {
    store: &'a Store,
}

impl<'a> SessionPurge<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    /// Up to `limit` deleted sessions not purged yet, deleted at or before `now`, oldest first.
    pub async fn due(&self, now: Timestamp, limit: usize) -> Result<Vec<PurgeDue>, StoreError> {
        let until = format!("{:015}#~", now.unix_millis().max(0));
        let items: Vec<PurgeDueItem> =
            due_page(self.store, self.table(), SESSIONS_PURGE, until, limit).await?;
        Ok(items.into_iter().map(|i| PurgeDue { project: i.project_id, session: i.id }).collect())
    }

    /// The session's items in the main table (transcript, files and their count, actions,
    /// feedback), whatever their state.
    pub async fn owned_items(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> Result<Vec<OwnedItem>, StoreError> {
        let mut owned = Vec::new();
        for prefix in [format!("{}#", session_sk(session)), format!("FEEDBACK#{session}#")] {
            let query = self
                .store
                .dynamo
                .query()
                .table_name(self.table())
                .key_condition_expression("PK = :pk AND begins_with(SK, :prefix)")
                .expression_attribute_values(":pk", s(project_pk(project)))
                .expression_attribute_values(":prefix", s(prefix))
                .consistent_read(true);
            let items: Vec<RawOwned> = query_all(query).await?;
            owned.extend(items.into_iter().map(|i| OwnedItem {
                pk: i.pk,
                sk: i.sk,
                file: i.file,
                locator: i.feedback.map(|f| format!("FEEDBACKID#{}", f.id)),
            }));
        }
        Ok(owned)
    }

    /// Deletes `items` (and their feedback locators) from the main table; gone ones count as done.
    pub async fn delete_items(&self, items: &[OwnedItem]) -> Result<(), StoreError> {
        // Files first, each with its bytes given back to the project's count (one transaction
        // per file); the batch below then finds them gone.
        for file in items.iter().filter_map(|item| item.file.as_ref()) {
            self.store.files().purge(file).await?;
        }
        let mut keys: Vec<(String, String)> = Vec::new();
        for item in items {
            keys.push((item.pk.clone(), item.sk.clone()));
            if let Some(locator) = &item.locator {
                keys.push((item.pk.clone(), locator.clone()));
            }
        }
        batch_write(self.store, self.table(), delete_requests(keys)?).await
    }

    /// Deletes every event of the session's log; how many there were.
    pub async fn delete_events(&self, session: &SessionId) -> Result<usize, StoreError> {
        let table = &self.store.names.events_table;
        let query = self
            .store
            .dynamo
            .query()
            .table_name(table)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", s(super::events::session_pk(session)))
            .projection_expression("PK, SK")
            .consistent_read(true);
        let keys: Vec<EventKey> = query_all(query).await?;
        let count = keys.len();
        let mut requests = Vec::with_capacity(count);
        for key in keys {
            let delete = DeleteRequest::builder()
                .key("PK", s(key.pk))
                .key("SK", AttributeValue::N(key.sk.to_string()))
                .build()
                .map_err(StoreError::unavailable)?;
            requests.push(WriteRequest::builder().delete_request(delete).build());
        }
        batch_write(self.store, table, requests).await?;
        Ok(count)
    }

    /// Deletes the objects under the session's prefixes of the files bucket (transcript bodies,
    /// file bytes, uploads never confirmed); how many there were.
    pub async fn delete_prefixed_objects(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> Result<usize, StoreError> {
        let bucket = self.store.objects()?;
        let mut keys = bucket.keys(&format!("transcripts/{project}/{session}/")).await?;
        keys.extend(bucket.keys(&format!("files/{project}/{session}/")).await?);
        if keys.is_empty() {
            return Ok(0);
        }
        bucket.delete_many(&keys).await
    }

    /// Deletes one file's bytes where they are kept (the files bucket or its Document Store
    /// bucket); a missing object is done already.
    pub async fn delete_file_object(&self, file: &SessionFile) -> Result<(), StoreError> {
        let bucket: Option<&BucketName> = file.bucket.as_ref();
        match self.store.file_objects(bucket)?.delete(&file.object_key()).await {
            Ok(()) | Err(StoreError::NotFound) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// The last step: the session item keeps only its keys and bookkeeping (a tombstone that
    /// later telemetry and retention still read), loses the title and metadata its users wrote,
    /// and leaves the purge queue. `false` when it was purged already (or is not deleted).
    pub async fn finish(
        &self,
        project: &ProjectId,
        session: &SessionId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(self.table())
            .key("PK", s(project_pk(project)))
            .key("SK", s(session_sk(session)))
            .condition_expression("attribute_exists(deleted_at) AND attribute_not_exists(purged_at)")
            .update_expression("SET purged_at = :now, metadata = :none REMOVE GSI2PK, GSI2SK, title")
            .expression_attribute_values(":now", serde_dynamo::to_attribute_value(now)?)
            .expression_attribute_values(":none", AttributeValue::M(Default::default()))
            .send()
            .await;
        match result.map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception())) {
            Ok(_) => Ok(true),
            Err(StoreError::Conflict) => Ok(false),
            Err(err) => Err(err),
        }
    }
}

fn delete_requests(keys: Vec<(String, String)>) -> Result<Vec<WriteRequest>, StoreError> {
    keys.into_iter()
        .map(|(pk, sk)| {
            let delete = DeleteRequest::builder()
                .key("PK", s(pk))
                .key("SK", s(sk))
                .build()
                .map_err(StoreError::unavailable)?;
            Ok(WriteRequest::builder().delete_request(delete).build())
        })
        .collect()
}
