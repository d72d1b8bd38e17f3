//! Where the content retention of Platform Runs finds its due work: one small item per Run,
//! written with the Run, in the due-work index.
//!
//! | item        | PK              | SK                 | GSI2PK (by_due)      | GSI2SK                       |
//! |-------------|-----------------|--------------------|----------------------|------------------------------|
//! | content due | `PROJECT#{pid}` | `RUNCONTENT#{rid}` | `RUN_CONTENT`        | `{reference ms:015}#{pid}#{rid}` |
//!
//! The reference time is the Run's creation, moved to its end (or later) by the retention step
//! when it looks too early; the step reads up to `now - retention`. The item goes once the Run's
//! content is erased (or the Run is gone).

use agentplane_domain::platform::run::{Run, RunId};
use agentplane_domain::{ProjectId, Timestamp};
use aws_sdk_dynamodb::types::Put;
use serde::{Deserialize, Serialize};

use super::keys::project_pk;
use super::s;
use crate::{Store, StoreError};

const PARTITION: &str = "RUN_CONTENT";

fn due_sk(id: &RunId) -> String {
    format!("RUNCONTENT#{id}")
}
fn due_key(at: Timestamp, project: &ProjectId, id: &RunId) -> String {
    format!("{:015}#{project}#{id}", at.unix_millis().max(0))
}

pub use agentplane_engine::ports::sweeps::ContentDue;

/// The due index's item of a Run whose content the retention step will look at.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ContentDueItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI2PK")]
    gsi2pk: String,
    #[serde(rename = "GSI2SK")]
    gsi2sk: String,
    pub project_id: ProjectId,
    pub run_id: RunId,
}

impl ContentDueItem {
    fn at(project_id: ProjectId, run_id: RunId, at: Timestamp) -> Self {
        Self {
            pk: project_pk(&project_id),
            sk: due_sk(&run_id),
            gsi2pk: PARTITION.into(),
            gsi2sk: due_key(at, &project_id, &run_id),
            project_id,
            run_id,
        }
    }
}

pub struct RunContent<'a> {
    store: &'a Store,
}

impl<'a> RunContent<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    /// The due item of a new Run (written in the Run's create transaction).
    pub(crate) fn put_for(&self, run: &Run) -> Result<Put, StoreError> {
        Put::builder()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(ContentDueItem::at(
                run.project_id,
                run.id,
                run.created_at,
            ))?))
            .build()
            .map_err(StoreError::unavailable)
    }

    /// Up to `limit` Runs whose reference time is at or before `until`, the oldest first.
    pub async fn due(&self, until: Timestamp, limit: usize) -> Result<Vec<ContentDue>, StoreError> {
        let until = format!("{:015}$", until.unix_millis().max(0));
        let items: Vec<ContentDueItem> =
            super::due_page(self.store, self.table(), PARTITION, until, limit).await?;
        Ok(items.into_iter().map(|i| ContentDue { project_id: i.project_id, run_id: i.run_id }).collect())
    }

    /// Moves the item's reference time to `at` (the step looked too early).
    pub async fn later(&self, due: &ContentDue, at: Timestamp) -> Result<(), StoreError> {
        let item = ContentDueItem::at(due.project_id, due.run_id, at);
        self.store
            .dynamo
            .put_item()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(item)?))
            .send()
            .await
            .map_err(super::backend)?;
        Ok(())
    }

    /// Removes the item (the Run's content is erased, or the Run is gone).
    pub async fn done(&self, due: &ContentDue) -> Result<(), StoreError> {
        self.store
            .dynamo
            .delete_item()
            .table_name(self.table())
            .key("PK", s(project_pk(&due.project_id)))
            .key("SK", s(due_sk(&due.run_id)))
            .send()
            .await
            .map_err(super::backend)?;
        Ok(())
    }
}
