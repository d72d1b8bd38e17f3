//! Project API keys. Two items per key, written in one transaction: the key's record under its
//! project, and a lookup item keyed by the key's SHA-256 that authentication reads. Revoking
//! deletes the lookup item in the same transaction that marks the record, so it takes effect on
//! the very next request. The lookup item also holds the key's request count of the current
//! rate window (`rl_w`, `rl_n`), counted by the read that authenticates (see
//! [`ApiKeys::authenticate_counted`]).

use agentplane_domain::api_key::{ApiKey, KeyHash};
use agentplane_domain::{ApiKeyId, ProjectId, Timestamp};
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
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

/// What a key presented under a rate limit comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyCheck {
    /// The key is of this project, and the request is counted.
    Allowed(ProjectId, ApiKeyId),
    /// The key is valid but has made its window's `max` requests; try again in this many seconds.
    Limited { retry_after_s: u64 },
    /// No such key, or it is revoked.
    Unknown,
}

/// The rate count lives on the key's lookup item itself: `rl_w` (the window number) and `rl_n`
/// (requests counted in it). Counting is the authentication read: an `UpdateItem` whose
/// condition requires the item (revocation deletes it, so a revoked key is refused at once) and
/// the count under the limit, returning the item.
const WINDOW_ATTR: &str = "rl_w";
const COUNT_ATTR: &str = "rl_n";

impl ApiKeys<'_> {
    /// Authenticates a presented key and counts the request against `limit` at `now`.
    ///
    /// Round trips: one within a window (the counted update, which replaces the plain read);
    /// two for a key's first request of a window (the update finds an older window, a second
    /// update starts the new one); a refused key or an over-limit request is one, plus a read
    /// when DynamoDB does not return the item with the failed condition.
    pub async fn authenticate_counted(
        &self,
        hash: &KeyHash,
        limit: agentplane_domain::quota::RateLimit,
        now: Timestamp,
    ) -> Result<KeyCheck, StoreError> {
        let mut window = limit.window(now);
        // Each pass either settles or sees another instance move the window on; a few passes
        // settle any race.
        for _ in 0..4 {
            match self.count_in(hash, window, limit.max).await? {
                Counted::Item(item) => return allowed(item),
                Counted::Failed(None) => return Ok(KeyCheck::Unknown),
                Counted::Failed(Some(old)) => match stored_window(&old) {
                    Some(w) if w == window => {
                        return Ok(KeyCheck::Limited { retry_after_s: limit.retry_after(window, now) });
                    }
                    // Another instance's clock is ahead: count in its window.
                    Some(w) if w > window => window = w,
                    _ => match self.start_window(hash, window).await? {
                        Some(item) => return allowed(item),
                        // Gone (revoked), or another request started the window first: again.
                        None => continue,
                    },
                },
            }
        }
        Err(StoreError::unavailable("the key's rate count kept moving"))
    }

    /// `rl_n + 1` when the stored window is `window` and its count is under `max`.
    async fn count_in(&self, hash: &KeyHash, window: i64, max: u32) -> Result<Counted, StoreError> {
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(key_hash_pk(hash.as_str())))
            .key("SK", s(KEY_HASH_SK))
            .update_expression("SET #n = #n + :one")
            .condition_expression("attribute_exists(PK) AND #w = :w AND #n < :max")
            .expression_attribute_names("#n", COUNT_ATTR)
            .expression_attribute_names("#w", WINDOW_ATTR)
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":w", n(window))
            .expression_attribute_values(":max", n(i64::from(max)))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(out) => Ok(Counted::Item(out.attributes.unwrap_or_default())),
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => match &failed.item {
                    Some(item) => Ok(Counted::Failed(Some(item.clone()))),
                    // An emulator that does not return the item: read it.
                    None => Ok(Counted::Failed(
                        super::get_item(
                            self.store,
                            &self.store.names.main_table,
                            key_hash_pk(hash.as_str()),
                            KEY_HASH_SK,
                        )
                        .await?,
                    )),
                },
                _ => Err(super::backend(err)),
            },
        }
    }

    /// Starts `window` with this request counted, when the stored window is older (or none);
    /// `None` when the item is gone or another request started it first.
    async fn start_window(&self, hash: &KeyHash, window: i64) -> Result<Option<Item>, StoreError> {
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(key_hash_pk(hash.as_str())))
            .key("SK", s(KEY_HASH_SK))
            .update_expression("SET #w = :w, #n = :one")
            .condition_expression("attribute_exists(PK) AND (attribute_not_exists(#w) OR #w < :w)")
            .expression_attribute_names("#n", COUNT_ATTR)
            .expression_attribute_names("#w", WINDOW_ATTR)
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":w", n(window))
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| super::conditional(e, |e| e.is_conditional_check_failed_exception()));
        match result {
            Ok(out) => Ok(Some(out.attributes.unwrap_or_default())),
            Err(StoreError::Conflict) => Ok(None),
            Err(err) => Err(err),
        }
    }
}

type Item = std::collections::HashMap<String, AttributeValue>;

enum Counted {
    /// Counted: the item as it is now.
    Item(Item),
    /// Not counted: the item as it was (`None`: there is none).
    Failed(Option<Item>),
}

fn allowed(item: Item) -> Result<KeyCheck, StoreError> {
    let lookup: KeyHashItem = serde_dynamo::from_item(item)?;
    Ok(KeyCheck::Allowed(lookup.project_id, lookup.key_id))
}

fn stored_window(item: &Item) -> Option<i64> {
    item.get(WINDOW_ATTR).and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok())
}

fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}
