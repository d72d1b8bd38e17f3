//! Document Store buckets registered to projects, in the main table.
//!
//! | item  | PK              | SK                | holds                        |
//! |-------|-----------------|-------------------|------------------------------|
//! | bucket| `PROJECT#{pid}` | `BUCKET#{name}`   | the registration             |
//! | claim | `BUCKET#{name}` | `BUCKET`          | the project that holds it    |
//! | count | `PROJECT#{pid}` | `BUCKETS#COUNT`   | `bucket_count`               |
//!
//! A registration is one transaction: the bucket item, the claim (so a bucket belongs to one
//! project at most), the project's count under its cap, and a check that the project exists.
//! Removing it deletes the item and the claim and gives the count back, in one transaction.

use agentplane_domain::ProjectId;
use agentplane_domain::bucket::{BucketName, DocumentBucket};
use aws_sdk_dynamodb::types::{ConditionCheck, Delete, Put, TransactWriteItem};
use serde::{Deserialize, Serialize};

use super::counted::{Counted, Counter};
use super::keys::{PROJECT_SK, project_pk};
use super::s;
use crate::{Store, StoreError};

fn bucket_sk(name: &BucketName) -> String {
    format!("BUCKET#{name}")
}
fn claim_pk(name: &BucketName) -> String {
    format!("BUCKET#{name}")
}
const CLAIM_SK: &str = "BUCKET";

fn counter(project: &ProjectId) -> Counter {
    Counter::new(project_pk(project), "BUCKETS#COUNT".to_owned(), "bucket_count")
}

#[derive(Serialize, Deserialize)]
struct BucketItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    bucket: DocumentBucket,
}

#[derive(Serialize, Deserialize)]
struct ClaimItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    project_id: ProjectId,
}

/// Why a registration was refused (the engine's port type).
pub use agentplane_engine::ports::buckets::Refused;

pub struct Buckets<'a> {
    store: &'a Store,
}

impl<'a> Buckets<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    /// Registers `bucket` to its project, at most `max` per project; `NotFound` when the project
    /// does not exist; `Ok(Err(_))` says why it was refused.
    pub async fn create(&self, bucket: &DocumentBucket, max: u32) -> Result<Result<(), Refused>, StoreError> {
        let table = self.table();
        let project = &bucket.project_id;
        let item = serde_dynamo::to_item(BucketItem {
            pk: project_pk(project),
            sk: bucket_sk(&bucket.name),
            bucket: bucket.clone(),
        })?;
        let claim = Put::builder()
            .table_name(table)
            .set_item(Some(serde_dynamo::to_item(ClaimItem {
                pk: claim_pk(&bucket.name),
                sk: CLAIM_SK.to_owned(),
                project_id: *project,
            })?))
            .condition_expression("attribute_not_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)?;
        let project_exists = ConditionCheck::builder()
            .table_name(table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(PROJECT_SK))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)?;
        let counter = counter(project);
        let guards = vec![
            TransactWriteItem::builder().put(claim).build(),
            TransactWriteItem::builder().condition_check(project_exists).build(),
        ];
        match super::counted::put_counted(
            self.store,
            &[Counted { counter: &counter, max: Some(max) }],
            guards,
            None,
            item,
        )
        .await
        {
            Ok(()) => Ok(Ok(())),
            // Which condition failed: read the claim, then the project.
            Err(StoreError::Conflict) => {
                let claim: Option<ClaimItem> =
                    super::get_as(self.store, table, claim_pk(&bucket.name), CLAIM_SK).await?;
                match claim {
                    Some(c) if c.project_id == *project => Ok(Err(Refused::Registered)),
                    Some(_) => Ok(Err(Refused::Taken)),
                    None => {
                        match super::get_item(self.store, table, project_pk(project), PROJECT_SK).await? {
                            None => Err(StoreError::NotFound),
                            Some(_) => Ok(Err(Refused::Full)),
                        }
                    }
                }
            }
            Err(err) => Err(err),
        }
    }

    /// The project's registration of `name`; `NotFound` when it has none.
    pub async fn get(&self, project: &ProjectId, name: &BucketName) -> Result<DocumentBucket, StoreError> {
        let item: Option<BucketItem> =
            super::get_as(self.store, self.table(), project_pk(project), bucket_sk(name)).await?;
        item.map(|i| i.bucket).ok_or(StoreError::NotFound)
    }

    /// Every bucket of the project, by name (at most its cap).
    pub async fn list(&self, project: &ProjectId) -> Result<Vec<DocumentBucket>, StoreError> {
        let query = self
            .store
            .dynamo
            .query()
            .table_name(self.table())
            .key_condition_expression("PK = :pk AND begins_with(SK, :prefix)")
            .expression_attribute_values(":pk", s(project_pk(project)))
            .expression_attribute_values(":prefix", s("BUCKET#"))
            .consistent_read(true);
        let items: Vec<BucketItem> = super::query_all(query).await?;
        Ok(items.into_iter().map(|i| i.bucket).collect())
    }

    /// Removes the registration and its claim and frees its place; `NotFound` when the project
    /// has no such bucket. Files already kept in the bucket stay there until they expire.
    pub async fn delete(&self, project: &ProjectId, name: &BucketName) -> Result<(), StoreError> {
        let release = Delete::builder()
            .table_name(self.table())
            .key("PK", s(claim_pk(name)))
            .key("SK", s(CLAIM_SK))
            .condition_expression("project_id = :p")
            .expression_attribute_values(":p", s(project.to_string()))
            .build()
            .map_err(StoreError::unavailable)?;
        let guards = vec![TransactWriteItem::builder().delete(release).build()];
        super::counted::delete_counted(
            self.store,
            &[&counter(project)],
            guards,
            None,
            project_pk(project),
            bucket_sk(name),
        )
        .await
    }
}
