//! Items capped by a count: a count item (`attr` on `PK`/`SK`) changes in the same transaction
//! as each put and delete of the items it counts, so concurrent creates never pass the cap and a
//! delete frees exactly one place. Webhook endpoints (per project), session files (per
//! session), environments (per project) are counted so.

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
    /// A second count on the same item that moves with this one (uncapped): a tenant counts
    /// all its endpoints and, beside that, its own.
    pub also: Option<&'static str>,
    /// The count lives on an item that must exist already (a tenant's), which a count never
    /// creates.
    pub must_exist: bool,
}

impl Counter {
    /// A count on an item of its own, made by the first count.
    pub fn new(pk: String, sk: String, attr: &'static str) -> Self {
        Self { pk, sk, attr, also: None, must_exist: false }
    }
}

/// A count to take (or give back) with a put (or delete), capped at `max` when counting up.
pub(crate) struct Counted<'a> {
    pub counter: &'a Counter,
    pub max: Option<u32>,
}

fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// Moves each counter by `step` (+1 or -1): up under its cap, down only while above zero.
fn count_update(
    table: &str,
    counted: &Counted<'_>,
    step: i64,
    ttl: Option<i64>,
) -> Result<Update, StoreError> {
    let c = counted.counter;
    let attrs: Vec<&str> = std::iter::once(c.attr).chain(c.also).collect();
    let mut conditions = Vec::new();
    if c.must_exist {
        conditions.push("attribute_exists(PK)".to_owned());
    }
    let sets: Vec<String> = if step > 0 {
        if counted.max.is_some() {
            conditions.push(format!("(attribute_not_exists({a}) OR {a} < :max)", a = c.attr));
        }
        attrs.iter().map(|a| format!("{a} = if_not_exists({a}, :zero) + :one")).collect()
    } else {
        conditions.extend(attrs.iter().map(|a| format!("{a} > :zero")));
        attrs.iter().map(|a| format!("{a} = {a} - :one")).collect()
    };
    let mut set = format!("SET {}", sets.join(", "));
    let mut update = Update::builder()
        .table_name(table)
        .key("PK", s(c.pk.clone()))
        .key("SK", s(c.sk.clone()))
        .expression_attribute_values(":zero", n(0))
        .expression_attribute_values(":one", n(1));
    if step > 0
        && let Some(max) = counted.max
    {
        update = update.expression_attribute_values(":max", n(i64::from(max)));
    }
    if let Some(at) = ttl {
        set.push_str(", expires_at = :exp");
        update = update.expression_attribute_values(":exp", n(at));
    }
    if !conditions.is_empty() {
        update = update.condition_expression(conditions.join(" AND "));
    }
    update.update_expression(set).build().map_err(StoreError::unavailable)
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
    put_counted(store, &[Counted { counter, max: Some(max) }], Vec::new(), ttl, item).await
}

/// Puts `item` (which must not exist yet) with every count of `counts` taken and every
/// `guards` condition holding, in one transaction; `Conflict` when a cap is reached or a guard
/// fails.
pub(crate) async fn put_counted(
    store: &Store,
    counts: &[Counted<'_>],
    guards: Vec<TransactWriteItem>,
    ttl: Option<i64>,
    item: Item,
) -> Result<(), StoreError> {
    let table = &store.names.main_table;
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(PK)")
        .build()
        .map_err(StoreError::unavailable)?;
    let mut tx = store.dynamo.transact_write_items();
    for counted in counts {
        tx = tx.transact_items(
            TransactWriteItem::builder().update(count_update(table, counted, 1, ttl)?).build(),
        );
    }
    for guard in guards {
        tx = tx.transact_items(guard);
    }
    send_contended(tx.transact_items(TransactWriteItem::builder().put(put).build())).await
}

/// Deletes the item at `(pk, sk)` with every counter of `counters` given its place back and
/// every `guards` condition holding, in one transaction; `Conflict` when a guard fails (the item
/// missing is `NotFound`: its condition is checked first, by a read, on a failure). `as_read`:
/// a condition (with no values) the item must still meet, so that what the caller computed from
/// its read (what to give back) is still true.
pub(crate) async fn delete_counted(
    store: &Store,
    counters: &[&Counter],
    guards: Vec<TransactWriteItem>,
    as_read: Option<&str>,
    pk: String,
    sk: String,
) -> Result<(), StoreError> {
    let table = &store.names.main_table;
    let condition = match as_read {
        Some(extra) => format!("attribute_exists(PK) AND {extra}"),
        None => "attribute_exists(PK)".to_owned(),
    };
    let delete = Delete::builder()
        .table_name(table)
        .key("PK", s(pk.clone()))
        .key("SK", s(sk.clone()))
        .condition_expression(condition)
        .build()
        .map_err(StoreError::unavailable)?;
    let mut tx = store
        .dynamo
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().delete(delete).build());
    for counter in counters {
        let counted = Counted { counter, max: None };
        tx = tx.transact_items(
            TransactWriteItem::builder().update(count_update(table, &counted, -1, None)?).build(),
        );
    }
    let had_guards = !guards.is_empty() || as_read.is_some();
    for guard in guards {
        tx = tx.transact_items(guard);
    }
    match send_contended(tx).await {
        Err(StoreError::Conflict) if !had_guards => Err(StoreError::NotFound),
        Err(StoreError::Conflict) => match super::get_item(store, table, pk, sk).await? {
            None => Err(StoreError::NotFound),
            Some(_) => Err(StoreError::Conflict),
        },
        other => other,
    }
}

/// The transaction item that gives `counter` one place back (with a write made elsewhere).
pub(crate) fn uncount(store: &Store, counter: &Counter) -> Result<TransactWriteItem, StoreError> {
    let counted = Counted { counter, max: None };
    Ok(TransactWriteItem::builder()
        .update(count_update(&store.names.main_table, &counted, -1, None)?)
        .build())
}

/// Sends a transaction that moves a count, retrying while the count item is contended.
pub(crate) async fn send(tx: TransactWriteItemsFluentBuilder) -> Result<(), StoreError> {
    send_contended(tx).await
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
