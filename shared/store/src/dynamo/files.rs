//! Session files in the main table, and their per-session count.
//!
//! | item  | PK              | SK                          | GSI1 (by_created)                               |
//! |-------|-----------------|-----------------------------|-------------------------------------------------|
//! | file  | `PROJECT#{pid}` | `SESSION#{sid}#FILE#{fid}`  | `PROJECT#{pid}#SESSION#{sid}#FILES` / created#fid |
//! | count | `PROJECT#{pid}` | `SESSION#{sid}#FILES#COUNT` | —                                               |
//! | bytes | `PROJECT#{pid}` | `FILES#BYTES`               | —                                               |
//!
//! The bytes item holds `stored_bytes`, the declared sizes of the project's files (the upload
//! URL is bound to that size, so a file never holds more). A create adds its size in the same
//! transaction as the file, under the condition that the sum stays within the project's quota;
//! every delete (the API's, the retention sweep's, a session purge's) takes it off in the same
//! transaction that deletes the file, so the sum is exact and concurrent creates never pass the
//! quota. A file counted so carries `bytes_counted` (files made before the count existed do not,
//! and give nothing back).
//!
//! The count item holds `file_count`; every create and delete changes it in the same
//! transaction as the file, under the condition `file_count < max` (create) and
//! `file_count > 0` (delete), so concurrent creates never pass the limit. Both items carry the
//! TTL attribute `expires_at` (Unix seconds): a file's is its own expiry, the count's the
//! newest file's, so the count goes when the last of its files does. A file turns `ready` once,
//! by a conditional update from `pending`.

use agentplane_domain::file::{FileId, FileStatus, SessionFile};
use agentplane_domain::page::{Page, PageRequest, created_sort_key};
use agentplane_domain::{ProjectId, SessionId};
use serde::{Deserialize, Serialize};

use super::keys::project_pk;
use super::page::{Item, created_after};
use super::{conditional, s};
use crate::{Store, StoreError};

fn file_sk(session: &SessionId, id: &FileId) -> String {
    format!("SESSION#{session}#FILE#{id}")
}
fn files_list(project: &ProjectId, session: &SessionId) -> String {
    format!("PROJECT#{project}#SESSION#{session}#FILES")
}
fn count_sk(session: &SessionId) -> String {
    format!("SESSION#{session}#FILES#COUNT")
}
pub(crate) const BYTES_SK: &str = "FILES#BYTES";
pub(crate) const BYTES_ATTR: &str = "stored_bytes";

#[derive(Serialize, Deserialize)]
struct FileItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK")]
    gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
    /// The retention sweep's due-work index: every file, by expiry.
    #[serde(rename = "GSI2PK", default)]
    gsi2pk: Option<String>,
    #[serde(rename = "GSI2SK", default)]
    gsi2sk: Option<String>,
    /// The TTL attribute, Unix seconds.
    expires_at: i64,
    /// Its size is in the project's `stored_bytes`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    bytes_counted: bool,
    /// The item's shape version (absent: 1). 2: its bytes are counted (`bytes_counted`); the
    /// count backfill brings shape 1 items to 2.
    #[serde(default = "super::count_backfill::first_shape")]
    shape: u32,
    file: SessionFile,
}

/// The `by_due` partition of files: the sweep reads the oldest expiries first.
pub const FILES_DUE: &str = "FILES_DUE";

fn due_sort_key(expires_at: i64, id: &FileId) -> String {
    format!("{:020}#{id}", expires_at.max(0))
}

impl FileItem {
    fn of(file: &SessionFile) -> Self {
        Self {
            pk: project_pk(&file.project_id),
            sk: file_sk(&file.session_id, &file.id),
            gsi1pk: files_list(&file.project_id, &file.session_id),
            gsi1sk: created_sort_key(file.created_at, &file.id),
            gsi2pk: Some(FILES_DUE.to_owned()),
            gsi2sk: Some(due_sort_key(file.expires_at.unix_seconds(), &file.id)),
            expires_at: file.expires_at.unix_seconds(),
            bytes_counted: true,
            shape: super::count_backfill::COUNTED_SHAPE,
            file: file.clone(),
        }
    }
}

pub struct Files<'a> {
    store: &'a Store,
}

impl<'a> Files<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    /// Writes a new file and counts it; `Conflict` when its session already has `max_files`.
    pub async fn create(&self, file: &SessionFile, max_files: u32) -> Result<(), StoreError> {
        self.create_within(file, max_files, u64::MAX).await
    }

    /// Writes a new file, counts it on its session and adds its size to its project's stored
    /// bytes, in one transaction; `Conflict` when the session has `max_files` already or the
    /// project's bytes would pass `max_bytes`.
    pub async fn create_within(
        &self,
        file: &SessionFile,
        max_files: u32,
        max_bytes: u64,
    ) -> Result<(), StoreError> {
        let Some(room) = max_bytes.checked_sub(file.size) else { return Err(StoreError::Conflict) };
        let item = serde_dynamo::to_item(FileItem::of(file))?;
        let ttl = Some(file.expires_at.unix_seconds());
        let add = self
            .bytes_update(&file.project_id, i128::from(file.size))
            .condition_expression("attribute_not_exists(#b) OR #b <= :room")
            .expression_attribute_values(
                ":room",
                aws_sdk_dynamodb::types::AttributeValue::N(room.to_string()),
            )
            .build()
            .map_err(StoreError::unavailable)?;
        let counter = counter(&file.project_id, &file.session_id);
        let counts = [super::counted::Counted { counter: &counter, max: Some(max_files) }];
        let add = aws_sdk_dynamodb::types::TransactWriteItem::builder().update(add).build();
        super::counted::put_counted(self.store, &counts, vec![add], ttl, item).await
    }

    /// The project's stored bytes (0 before its first counted file).
    pub async fn stored_bytes(&self, project: &ProjectId) -> Result<u64, StoreError> {
        let item = super::get_item(self.store, self.table(), project_pk(project), BYTES_SK).await?;
        Ok(item
            .as_ref()
            .and_then(|i| i.get(BYTES_ATTR))
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    /// `stored_bytes += delta` on the project's bytes item (made by the first add).
    fn bytes_update(
        &self,
        project: &ProjectId,
        delta: i128,
    ) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
        aws_sdk_dynamodb::types::Update::builder()
            .table_name(self.table())
            .key("PK", s(project_pk(project)))
            .key("SK", s(BYTES_SK))
            .update_expression("ADD #b :delta")
            .expression_attribute_names("#b", BYTES_ATTR)
            .expression_attribute_values(
                ":delta",
                aws_sdk_dynamodb::types::AttributeValue::N(delta.to_string()),
            )
    }

    /// The transaction items giving a deleted file's bytes back (none for a file made before
    /// bytes were counted).
    fn give_back(
        &self,
        item: &FileItem,
    ) -> Result<Vec<aws_sdk_dynamodb::types::TransactWriteItem>, StoreError> {
        if !item.bytes_counted {
            return Ok(Vec::new());
        }
        let update = self
            .bytes_update(&item.file.project_id, -i128::from(item.file.size))
            .build()
            .map_err(StoreError::unavailable)?;
        Ok(vec![aws_sdk_dynamodb::types::TransactWriteItem::builder().update(update).build()])
    }

    /// Deletes a file of a session being purged, giving its bytes back (its session's count goes
    /// with the session); a file gone already is done.
    pub async fn purge(&self, file: &SessionFile) -> Result<(), StoreError> {
        for _ in 0..3 {
            let item: FileItem = match self.raw(&file.project_id, &file.session_id, &file.id).await {
                Ok(raw) => serde_dynamo::from_item(raw)?,
                Err(StoreError::NotFound) => return Ok(()),
                Err(err) => return Err(err),
            };
            let delete = aws_sdk_dynamodb::types::Delete::builder()
                .table_name(self.table())
                .key("PK", s(project_pk(&file.project_id)))
                .key("SK", s(file_sk(&file.session_id, &file.id)))
                .condition_expression(format!("attribute_exists(PK) AND {}", counted_as(&item)))
                .build()
                .map_err(StoreError::unavailable)?;
            let mut tx =
                self.store.dynamo.transact_write_items().transact_items(
                    aws_sdk_dynamodb::types::TransactWriteItem::builder().delete(delete).build(),
                );
            for give in self.give_back(&item)? {
                tx = tx.transact_items(give);
            }
            match super::counted::send(tx).await {
                // Gone meanwhile, or counted meanwhile: read again.
                Err(StoreError::Conflict) => continue,
                other => return other,
            }
        }
        Ok(())
    }

    async fn raw(&self, project: &ProjectId, session: &SessionId, id: &FileId) -> Result<Item, StoreError> {
        super::get_item(self.store, self.table(), project_pk(project), file_sk(session, id))
            .await?
            .ok_or(StoreError::NotFound)
    }

    pub async fn get(
        &self,
        project: &ProjectId,
        session: &SessionId,
        id: &FileId,
    ) -> Result<SessionFile, StoreError> {
        let item: FileItem = serde_dynamo::from_item(self.raw(project, session, id).await?)?;
        Ok(item.file)
    }

    /// How many files the session has (the count item).
    pub async fn count(&self, project: &ProjectId, session: &SessionId) -> Result<u32, StoreError> {
        super::counted::read(self.store, &counter(project, session)).await
    }

    pub async fn list(
        &self,
        project: &ProjectId,
        session: &SessionId,
        page: &PageRequest,
        after: Option<&FileId>,
    ) -> Result<Page<SessionFile>, StoreError> {
        let after = after.map(|id| self.raw(project, session, id));
        created_after(self.store, &files_list(project, session), after, page, |i: FileItem| i.file).await
    }

    /// `pending` → `ready`, once; `Conflict` when it is not pending (any more) or is gone.
    pub async fn mark_ready(&self, file: &SessionFile) -> Result<(), StoreError> {
        self.store
            .dynamo
            .update_item()
            .table_name(self.table())
            .key("PK", s(project_pk(&file.project_id)))
            .key("SK", s(file_sk(&file.session_id, &file.id)))
            .update_expression("SET #file.#status = :ready")
            .condition_expression("#file.#status = :pending")
            .expression_attribute_names("#file", "file")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":ready", serde_dynamo::to_attribute_value(FileStatus::Ready)?)
            .expression_attribute_values(":pending", serde_dynamo::to_attribute_value(FileStatus::Pending)?)
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    /// Up to `limit` files whose expiry is at or before `now`, the oldest first (what the
    /// retention sweep deletes; what it deletes leaves the index, so the next read starts
    /// where this one's work stopped).
    pub async fn expired(
        &self,
        now: agentplane_domain::Timestamp,
        limit: usize,
    ) -> Result<Vec<SessionFile>, StoreError> {
        let items: Vec<FileItem> = super::due_page(
            self.store,
            self.table(),
            FILES_DUE,
            format!("{:020}#~", now.unix_seconds().max(0)),
            limit,
        )
        .await?;
        Ok(items.into_iter().map(|item| item.file).collect())
    }

    /// Deletes the file and uncounts it; `NotFound` when it is not there. The delete holds only
    /// while the file is counted as it was read (the count backfill may count it meanwhile: the
    /// file is then read again, so its bytes are given back).
    pub async fn delete(
        &self,
        project: &ProjectId,
        session: &SessionId,
        id: &FileId,
    ) -> Result<(), StoreError> {
        for _ in 0..3 {
            let item: FileItem = serde_dynamo::from_item(self.raw(project, session, id).await?)?;
            let give_back = self.give_back(&item)?;
            match super::counted::delete_counted(
                self.store,
                &[&counter(project, session)],
                give_back,
                Some(counted_as(&item)),
                project_pk(project),
                file_sk(session, id),
            )
            .await
            {
                Err(StoreError::Conflict) => continue,
                other => return other,
            }
        }
        Err(StoreError::Conflict)
    }
}

/// The condition that the file's bytes are (or are not) counted, as `item` was read.
fn counted_as(item: &FileItem) -> &'static str {
    if item.bytes_counted { "attribute_exists(bytes_counted)" } else { "attribute_not_exists(bytes_counted)" }
}

/// The session's file count.
fn counter(project: &ProjectId, session: &SessionId) -> super::counted::Counter {
    super::counted::Counter::new(project_pk(project), count_sk(session), "file_count")
}
