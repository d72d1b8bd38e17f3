//! Leased slots: a capped set of places `0..max` under one partition, each an item that names
//! its holder and until when it holds the place.
//!
//! | item | PK            | SK           |
//! |------|---------------|--------------|
//! | slot | the set's key | `SLOT#{i:03}` |
//!
//! A place is taken by a conditional put (free, or its lease past, or already this holder's),
//! renewed while the holder lives, and given back by a conditional delete (only by its holder).
//! A holder that crashed stops renewing, so its place comes back when the lease runs out; no
//! sweep and no count to repair. Background runs (a tenant's 10 running) and live event streams
//! (per key and per project) are admitted so.

use agentplane_domain::Timestamp;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, Update};
use serde::{Deserialize, Serialize};

use super::{query_all, s};
use crate::{Store, StoreError};

pub fn slot_sk(index: u32) -> String {
    format!("SLOT#{index:03}")
}

/// One place of a set: which holder has it, and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    pub index: u32,
    pub holder: String,
    pub lease_until: Timestamp,
    /// The item's TTL (Unix seconds), for sets whose partitions can be left behind (a deleted
    /// key's stream slots); a place is free once its lease is past, whatever this says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

/// A held place: the set's partition and the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub pk: String,
    pub index: u32,
}

fn attr<T: Serialize>(value: T) -> Result<AttributeValue, StoreError> {
    Ok(serde_dynamo::to_attribute_value(value)?)
}

/// Every place of the set at `pk` that has an item (held, lease past or not); one strongly
/// consistent query.
pub(crate) async fn held(store: &Store, pk: &str) -> Result<Vec<Slot>, StoreError> {
    let query = store
        .dynamo
        .query()
        .table_name(&store.names.main_table)
        .consistent_read(true)
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", s(pk));
    query_all(query).await
}

/// The indexes of `0..max` that no live lease of `held` holds, in order.
pub fn free(max: u32, held: &[Slot], now: Timestamp) -> Vec<u32> {
    (0..max.max(1)).filter(|i| held.iter().all(|s| s.index != *i || s.lease_until < now)).collect()
}

/// Takes `place` for `holder` until `lease_until`: it must be free, its lease past, or already
/// `holder`'s.
pub(crate) fn take(
    store: &Store,
    place: &Place,
    holder: &str,
    now: Timestamp,
    lease_until: Timestamp,
    expires_at: Option<i64>,
) -> Result<Put, StoreError> {
    let item = Slot {
        pk: place.pk.clone(),
        sk: slot_sk(place.index),
        index: place.index,
        holder: holder.to_owned(),
        lease_until,
        expires_at,
    };
    Put::builder()
        .table_name(&store.names.main_table)
        .set_item(Some(serde_dynamo::to_item(item)?))
        .condition_expression("attribute_not_exists(PK) OR lease_until < :now OR holder = :holder")
        .expression_attribute_values(":now", attr(now)?)
        .expression_attribute_values(":holder", s(holder))
        .build()
        .map_err(StoreError::unavailable)
}

/// Moves `holder`'s lease on `place` to `lease_until` (fails when another holder has it now).
pub(crate) fn renew(
    store: &Store,
    place: &Place,
    holder: &str,
    lease_until: Timestamp,
    expires_at: Option<i64>,
) -> Result<Update, StoreError> {
    let mut update = Update::builder()
        .table_name(&store.names.main_table)
        .key("PK", s(place.pk.clone()))
        .key("SK", s(slot_sk(place.index)))
        .condition_expression("holder = :holder")
        .expression_attribute_values(":holder", s(holder))
        .expression_attribute_values(":until", attr(lease_until)?);
    update = match expires_at {
        Some(at) => update
            .update_expression("SET lease_until = :until, expires_at = :exp")
            .expression_attribute_values(":exp", AttributeValue::N(at.to_string())),
        None => update.update_expression("SET lease_until = :until"),
    };
    update.build().map_err(StoreError::unavailable)
}

/// Gives `place` back if `holder` still has it (a place already taken over, or gone, is left).
pub(crate) fn release(store: &Store, place: &Place, holder: &str) -> Result<Delete, StoreError> {
    Delete::builder()
        .table_name(&store.names.main_table)
        .key("PK", s(place.pk.clone()))
        .key("SK", s(slot_sk(place.index)))
        .condition_expression("attribute_not_exists(PK) OR holder = :holder")
        .expression_attribute_values(":holder", s(holder))
        .build()
        .map_err(StoreError::unavailable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(index: u32, lease_ms: i64) -> Slot {
        Slot {
            pk: "P".into(),
            sk: slot_sk(index),
            index,
            holder: "h".into(),
            lease_until: Timestamp::from_unix_millis(lease_ms),
            expires_at: None,
        }
    }

    #[test]
    fn a_place_is_free_when_unheld_or_its_lease_is_past() {
        let now = Timestamp::from_unix_millis(1_000);
        let held = [slot(0, 2_000), slot(2, 999), slot(3, 1_000)];
        assert_eq!(free(4, &held, now), vec![1, 2]);
        assert_eq!(free(0, &[], now), vec![0], "a set has at least one place");
    }
}
