//! Project API keys. Two items per key, written in one transaction: the key's record under its
//! project, and a lookup item keyed by the key's SHA-256 that authentication reads. Revoking
//! deletes the lookup item in the same transaction that marks the record, so it takes effect on
//! the very next request.

use agentplane_domain::api_key::{ApiKey, KeyHash};
use agentplane_domain::{ApiKeyId, ProjectId, Timestamp};
use aws_sdk_dynamodb::types::{ConditionCheck, Delete, Put, TransactWriteItem, Update};
use serde::{Deserialize, Serialize};

use super::keys::{KEY_HASH_SK, PROJECT_SK, api_key_sk, key_hash_pk, project_pk};
use super::{s, transaction_conflict};
use crate::{Store, StoreError};

#[derive(Serialize, Deserialize)]
struct ApiKeyItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    hash: KeyHash,
    #[serde(flatten)]
    key: ApiKey,
}

#[derive(Serialize, Deserialize)]
struct KeyHashItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    project_id: ProjectId,
    key_id: ApiKeyId,
}

pub struct ApiKeys<'a> {
    store: &'a Store,
}

impl<'a> ApiKeys<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    /// Stores a new key for an existing project; `NotFound` when the project does not exist.
    pub async fn create(&self, key: &ApiKey, hash: &KeyHash) -> Result<(), StoreError> {
        let table = &self.store.names.main_table;
        let record = ApiKeyItem {
            pk: project_pk(&key.project_id),
            sk: api_key_sk(&key.id),
            hash: hash.clone(),
            key: key.clone(),
        };
        let lookup = KeyHashItem {
            pk: key_hash_pk(hash.as_str()),
            sk: KEY_HASH_SK.into(),
            project_id: key.project_id,
            key_id: key.id,
        };
        let project_exists = ConditionCheck::builder()
            .table_name(table)
            .key("PK", s(project_pk(&key.project_id)))
            .key("SK", s(PROJECT_SK))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)?;
        let put = |item| {
            Put::builder()
                .table_name(table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(PK)")
                .build()
                .map_err(StoreError::unavailable)
        };
        let result = self
            .store
            .dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().condition_check(project_exists).build())
            .transact_items(TransactWriteItem::builder().put(put(serde_dynamo::to_item(record)?)?).build())
            .transact_items(TransactWriteItem::builder().put(put(serde_dynamo::to_item(lookup)?)?).build())
            .send()
            .await;
        match result.map_err(transaction_conflict) {
            Ok(_) => Ok(()),
            // The only condition that can fail for fresh random ids is the project's.
            Err(StoreError::Conflict) => Err(StoreError::NotFound),
            Err(err) => Err(err),
        }
    }

    pub async fn get(&self, project: &ProjectId, id: &ApiKeyId) -> Result<ApiKey, StoreError> {
        Ok(self.get_item(project, id).await?.key)
    }

    async fn get_item(&self, project: &ProjectId, id: &ApiKeyId) -> Result<ApiKeyItem, StoreError> {
        let item =
            super::get_item(self.store, &self.store.names.main_table, project_pk(project), api_key_sk(id))
                .await?
                .ok_or(StoreError::NotFound)?;
        Ok(serde_dynamo::from_item(item)?)
    }

    /// Revokes a key at once. Revoking a revoked key changes nothing and returns it as it is.
    pub async fn revoke(
        &self,
        project: &ProjectId,
        id: &ApiKeyId,
        now: Timestamp,
    ) -> Result<ApiKey, StoreError> {
        let item = self.get_item(project, id).await?;
        if item.key.revoked_at.is_some() {
            return Ok(item.key);
        }
        let table = &self.store.names.main_table;
        let mark = Update::builder()
            .table_name(table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(api_key_sk(id)))
            .update_expression("SET revoked_at = :now")
            // An unrevoked key stores `revoked_at` as NULL (serde's None), not as a missing attribute.
            .condition_expression(
                "attribute_exists(PK) AND (attribute_not_exists(revoked_at) OR attribute_type(revoked_at, :null))",
            )
            .expression_attribute_values(":now", serde_dynamo::to_attribute_value(now)?)
            .expression_attribute_values(":null", s("NULL"))
            .build()
            .map_err(StoreError::unavailable)?;
        let forget = Delete::builder()
            .table_name(table)
            .key("PK", s(key_hash_pk(item.hash.as_str())))
            .key("SK", s(KEY_HASH_SK))
            .build()
            .map_err(StoreError::unavailable)?;
        let result = self
            .store
            .dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(mark).build())
            .transact_items(TransactWriteItem::builder().delete(forget).build())
            .send()
            .await;
        match result.map_err(transaction_conflict) {
            // A concurrent revoke won: one effect, and the caller sees the key as revoked.
            Ok(_) | Err(StoreError::Conflict) => self.get(project, id).await,
            Err(err) => Err(err),
        }
    }

    /// The project a presented key belongs to, if the key exists and is not revoked.
    pub async fn authenticate(&self, hash: &KeyHash) -> Result<Option<(ProjectId, ApiKeyId)>, StoreError> {
        let item = super::get_item(
            self.store,
            &self.store.names.main_table,
            key_hash_pk(hash.as_str()),
            KEY_HASH_SK,
        )
        .await?;
        match item {
            Some(item) => {
                let lookup: KeyHashItem = serde_dynamo::from_item(item)?;
                Ok(Some((lookup.project_id, lookup.key_id)))
            }
            None => Ok(None),
        }
    }
}
