//! Items capped by a count: a count item (`attr` on `PK`/`SK`) changes in the same transaction
//! as each put and delete of the items it counts, so concurrent creates never pass the cap and a
//! delete frees exactly one place. Webhook endpoints (per project) and session files (per
//! session) are counted so.

use aws_sdk_dynamodb::operation::transact_write_items::builders::TransactWriteItemsFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};

use super::page::Item;
use super::s;
use crate::{Store, StoreError};

/// The count item of a capped set.
pub(crate) struct Counter {
    pub pk: String,
    pub sk: String,
    /// The attribute holding the count.
    pub attr: &'static str,
}

fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// Puts `item` (which must not exist yet) and counts it, in one transaction; `Conflict` when
/// the count is at `max` already. `ttl`: an expiry (Unix seconds) the count item takes too.
pub(crate) async fn put(
    store: &Store,
    counter: &Counter,
    max: u32,
    ttl: Option<i64>,
    item: Item,
) -> Result<(), StoreError> {
    let table = &store.names.main_table;
    let mut set = format!("SET {a} = if_not_exists({a}, :zero) + :one", a = counter.attr);
    let mut count = Update::builder()
        .table_name(table)
        .key("PK", s(counter.pk.clone()))
        .key("SK", s(counter.sk.clone()))
        .condition_expression(format!("attribute_not_exists({a}) OR {a} < :max", a = counter.attr))
        .expression_attribute_values(":zero", n(0))
        .expression_attribute_values(":one", n(1))
        .expression_attribute_values(":max", n(i64::from(max)));
    if let Some(at) = ttl {
        set.push_str(", expires_at = :exp");
        count = count.expression_attribute_values(":exp", n(at));
    }
    let count = count.update_expression(set).build().map_err(StoreError::unavailable)?;
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(PK)")
        .build()
        .map_err(StoreError::unavailable)?;
    let tx = store
        .dynamo
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().update(count).build())
        .transact_items(TransactWriteItem::builder().put(put).build());
    send_contended(tx).await
}

/// Deletes the counted item at `(pk, sk)` and uncounts it, in one transaction; `NotFound` when
/// it is not there.
pub(crate) async fn delete(
    store: &Store,
    counter: &Counter,
    pk: String,
    sk: String,
) -> Result<(), StoreError> {
    let table = &store.names.main_table;
    let delete = Delete::builder()
        .table_name(table)
        .key("PK", s(pk))
        .key("SK", s(sk))
        .condition_expression("attribute_exists(PK)")
        .build()
        .map_err(StoreError::unavailable)?;
    let count = Update::builder()
        .table_name(table)
        .key("PK", s(counter.pk.clone()))
        .key("SK", s(counter.sk.clone()))
        .update_expression(format!("SET {a} = {a} - :one", a = counter.attr))
        .condition_expression(format!("{} > :zero", counter.attr))
        .expression_attribute_values(":zero", n(0))
        .expression_attribute_values(":one", n(1))
        .build()
        .map_err(StoreError::unavailable)?;
    let tx = store
        .dynamo
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().delete(delete).build())
        .transact_items(TransactWriteItem::builder().update(count).build());
    match send_contended(tx).await {
        Err(StoreError::Conflict) => Err(StoreError::NotFound),
        other => other,
    }
}

/// The count (0 without a count item).
pub(crate) async fn read(store: &Store, counter: &Counter) -> Result<u32, StoreError> {
    let item =
        super::get_item(store, &store.names.main_table, counter.pk.clone(), counter.sk.clone()).await?;
    Ok(count_of(item.as_ref(), counter.attr))
}

/// The count an item read elsewhere holds (0 when absent).
pub(crate) fn count_of(item: Option<&Item>, attr: &str) -> u32 {
    item.and_then(|i| i.get(attr)).and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Sends a transaction on a count item, which concurrent creates and deletes all touch: a cancellation for a conflicting transaction (not a failed condition) is retried with
/// a growing, jittered pause a bounded number of times. A failed condition is `Conflict`.
async fn send_contended(tx: TransactWriteItemsFluentBuilder) -> Result<(), StoreError> {
    let mut pause_ms = 10u64;
    for _ in 0..8 {
        match tx.clone().send().await {
            Ok(_) => return Ok(()),
            Err(err) if contended(&err) => {
                let jitter = u64::from(
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.subsec_nanos())
                        % 10,
                );
                tokio::time::sleep(std::time::Duration::from_millis(pause_ms + jitter * pause_ms / 10)).await;
                pause_ms = (pause_ms * 2).min(400);
            }
            Err(err) => return Err(super::transaction_conflict(err)),
        }
    }
    Err(StoreError::unavailable("a count item kept being contended"))
}

fn contended(
    err: &aws_sdk_dynamodb::error::SdkError<
        aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError,
        aws_sdk_dynamodb::config::http::HttpResponse,
    >,
) -> bool {
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError as E;
    match err.as_service_error() {
        Some(E::TransactionCanceledException(c)) => {
            let reasons = c.cancellation_reasons();
            !reasons.iter().any(|r| r.code() == Some("ConditionalCheckFailed"))
                && reasons.iter().any(|r| r.code() == Some("TransactionConflict"))
        }
        Some(E::TransactionInProgressException(_)) => true,
        _ => false,
    }
}
