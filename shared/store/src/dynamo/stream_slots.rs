//! The places of open event streams: each open stream holds one leased slot of its key and one of
//! its project (`slots.rs`), taken together in one transaction and given back together.
//!
//! | item         | PK                             | SK            |
//! |--------------|--------------------------------|---------------|
//! | key slot     | `STREAMS#KEY#{api key id}`     | `SLOT#{i:03}` |
//! | project slot | `STREAMS#PROJECT#{project id}` | `SLOT#{i:03}` |
//!
//! Every stream is its own Lambda invocation when deployed, so the count lives here, not in a
//! process. A stream renews its lease while it runs and gives both places back when it ends; an
//! invocation that died frees them when its lease runs out. The items carry a TTL a day past
//! their lease, so a deleted key's partition does not stay behind.

use agentplane_domain::api_key::KeyHash;
use agentplane_domain::{ApiKeyId, ProjectId, SessionId, Timestamp};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::TransactWriteItem;

use super::keys::{KEY_HASH_SK, key_hash_pk, project_pk, session_sk};
use super::slots::{self, Place};
use super::transaction_conflict;
use crate::{Store, StoreError};

pub fn key_streams_pk(key: &ApiKeyId) -> String {
    format!("STREAMS#KEY#{key}")
}

pub fn project_streams_pk(project: &ProjectId) -> String {
    format!("STREAMS#PROJECT#{project}")
}

/// How long a slot item outlives its lease before DynamoDB's TTL removes it.
const TTL_PAST_LEASE_S: i64 = 86_400;

/// The caps a stream is admitted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCaps {
    pub per_key: u32,
    pub per_project: u32,
}

/// Which cap refused a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamsFull {
    Key,
    Project,
}

/// The two places an open stream holds, under its own holder id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamHold {
    pub holder: String,
    key: Place,
    project: Place,
}

pub struct StreamSlots<'a> {
    store: &'a Store,
}

fn expiry(lease_until: Timestamp) -> Option<i64> {
    Some(lease_until.unix_seconds() + TTL_PAST_LEASE_S)
}

/// The indexes of a refused transaction's items that another stream has or was taking (a failed
/// condition, or a concurrent transaction on the same place).
fn contested(err: &aws_sdk_dynamodb::error::SdkError<TransactWriteItemsError>) -> Vec<usize> {
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(c)) => c
            .cancellation_reasons()
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r.code(), Some("ConditionalCheckFailed" | "TransactionConflict")))
            .map(|(i, _)| i)
            .collect(),
        _ => Vec::new(),
    }
}

/// The free places in the order to try them: starting at an offset drawn from the holder id, so
/// streams opening at once do not all go for the lowest free place.
fn in_turn(mut free: Vec<u32>, holder: &str) -> std::vec::IntoIter<u32> {
    if !free.is_empty() {
        let seed = holder.bytes().fold(0usize, |acc, b| acc.wrapping_mul(31).wrapping_add(usize::from(b)));
        let len = free.len();
        free.rotate_left(seed % len);
    }
    free.into_iter()
}

impl<'a> StreamSlots<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    /// Takes a place of `key` and one of `project` for `holder` until `lease_until`, or says
    /// which set is full. Both sets are read first (two queries, sent together), then one
    /// transaction takes a free place of each; a place another stream took meanwhile moves on
    /// to the next free one.
    pub async fn open(
        &self,
        key: &ApiKeyId,
        project: &ProjectId,
        holder: &str,
        caps: StreamCaps,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Result<StreamHold, StreamsFull>, StoreError> {
        let (key_pk, project_pk) = (key_streams_pk(key), project_streams_pk(project));
        let (key_held, project_held) =
            tokio::try_join!(slots::held(self.store, &key_pk), slots::held(self.store, &project_pk))?;
        let mut key_free = in_turn(slots::free(caps.per_key, &key_held, now), holder);
        let mut project_free = in_turn(slots::free(caps.per_project, &project_held, now), holder);
        let Some(mut k) = key_free.next() else { return Ok(Err(StreamsFull::Key)) };
        let Some(mut p) = project_free.next() else { return Ok(Err(StreamsFull::Project)) };
        loop {
            let hold = StreamHold {
                holder: holder.to_owned(),
                key: Place { pk: key_pk.clone(), index: k },
                project: Place { pk: project_pk.clone(), index: p },
            };
            let exp = expiry(lease_until);
            let items = vec![
                TransactWriteItem::builder()
                    .put(slots::take(self.store, &hold.key, holder, now, lease_until, exp)?)
                    .build(),
                TransactWriteItem::builder()
                    .put(slots::take(self.store, &hold.project, holder, now, lease_until, exp)?)
                    .build(),
            ];
            let err =
                match self.store.dynamo.transact_write_items().set_transact_items(Some(items)).send().await {
                    Ok(_) => return Ok(Ok(hold)),
                    Err(err) => err,
                };
            let failed = contested(&err);
            if failed.is_empty() {
                return Err(transaction_conflict(err));
            }
            if failed.contains(&0) {
                match key_free.next() {
                    Some(next) => k = next,
                    None => return Ok(Err(StreamsFull::Key)),
                }
            }
            if failed.contains(&1) {
                match project_free.next() {
                    Some(next) => p = next,
                    None => return Ok(Err(StreamsFull::Project)),
                }
            }
        }
    }

    /// Moves the hold's lease on both places to `lease_until`, in one transaction; `Conflict`
    /// when either place is another holder's now (its lease ran out and it was taken).
    pub async fn renew(&self, hold: &StreamHold, lease_until: Timestamp) -> Result<(), StoreError> {
        let exp = expiry(lease_until);
        let items = vec![
            TransactWriteItem::builder()
                .update(slots::renew(self.store, &hold.key, &hold.holder, lease_until, exp)?)
                .build(),
            TransactWriteItem::builder()
                .update(slots::renew(self.store, &hold.project, &hold.holder, lease_until, exp)?)
                .build(),
        ];
        self.store
            .dynamo
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map_err(transaction_conflict)?;
        Ok(())
    }

    /// Gives both places back (each only if the hold still has it), in one transaction. A place
    /// another stream took after this one's lease ran out is left to it (then the other place
    /// of the hold is freed by its lease).
    pub async fn close(&self, hold: &StreamHold) -> Result<(), StoreError> {
        let items = vec![
            TransactWriteItem::builder().delete(slots::release(self.store, &hold.key, &hold.holder)?).build(),
            TransactWriteItem::builder()
                .delete(slots::release(self.store, &hold.project, &hold.holder)?)
                .build(),
        ];
        self.store
            .dynamo
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map(|_| ())
            .map_err(transaction_conflict)
            .or_else(|err| if matches!(err, StoreError::Conflict) { Ok(()) } else { Err(err) })
    }

    /// Whether an open stream may go on: the key (by its hash) still authenticates for
    /// `project` and the session is live. One strongly consistent BatchGetItem of both items.
    pub async fn standing(
        &self,
        key: &KeyHash,
        project: &ProjectId,
        session: &SessionId,
    ) -> Result<bool, StoreError> {
        let (key_pk, session_pk) = (key_hash_pk(key.as_str()), project_pk(project));
        let items = super::batch_get(
            self.store,
            &self.store.names.main_table,
            [(key_pk.clone(), KEY_HASH_SK.to_owned()), (session_pk.clone(), session_sk(session))],
        )
        .await?;
        let pk_of = |item: &super::page::Item| item.get("PK").and_then(|v| v.as_s().ok()).cloned();
        let key_ok = items.iter().any(|item| {
            pk_of(item).as_deref() == Some(key_pk.as_str())
                && item
                    .get("project_id")
                    .and_then(|v| serde_dynamo::from_attribute_value::<_, ProjectId>(v.clone()).ok())
                    == Some(*project)
        });
        let session_ok = items.iter().any(|item| {
            pk_of(item).as_deref() == Some(session_pk.as_str()) && !item.contains_key("deleted_at")
        });
        Ok(key_ok && session_ok)
    }

    /// The leases of `key`'s places, live or past.
    pub async fn leases_of_key(&self, key: &ApiKeyId) -> Result<Vec<Timestamp>, StoreError> {
        let held = slots::held(self.store, &key_streams_pk(key)).await?;
        Ok(held.into_iter().map(|s| s.lease_until).collect())
    }

    /// How many places of `key`'s set are held with a live lease at `now` (for tests and the
    /// Studio).
    pub async fn open_for_key(&self, key: &ApiKeyId, now: Timestamp) -> Result<usize, StoreError> {
        let held = slots::held(self.store, &key_streams_pk(key)).await?;
        Ok(held.iter().filter(|s| s.lease_until >= now).count())
    }
}
