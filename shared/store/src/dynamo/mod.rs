//! DynamoDB adapters, one module per entity: its keys, its item mapping and its queries.

pub mod actions;
pub mod agent_runs;
pub mod agents;
pub mod allocations;
pub mod api_keys;
pub mod buckets;
pub mod count_backfill;
mod counted;
pub mod environments;
pub mod events;
pub mod feedback;
pub mod files;
pub mod job_cursor;
pub mod keys;
pub mod live_sandboxes;
pub mod nodes;
pub mod observations;
pub mod page;
pub mod projects;
pub mod run_content;
pub mod runs;
pub mod sandboxes;
pub mod session_placement;
pub mod session_purge;
pub mod sessions;
pub mod side_calls;
pub mod slots;
pub mod stream_slots;
pub mod telemetry;
pub mod tenant_pauses;
pub mod tenants;
pub mod transcripts;
pub mod turns;
pub mod webhook_events;
pub mod webhooks;
pub mod workspace_sweep;

use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;

use crate::StoreError;

/// A strongly consistent read of one item by its `PK`/`SK`.
pub(crate) async fn get_item(
    store: &crate::Store,
    table: &str,
    pk: impl Into<String>,
    sk: impl Into<String>,
) -> Result<Option<std::collections::HashMap<String, AttributeValue>>, StoreError> {
    Ok(store
        .dynamo
        .get_item()
        .table_name(table)
        .key("PK", s(pk))
        .key("SK", s(sk))
        .consistent_read(true)
        .send()
        .await
        .map_err(backend)?
        .item)
}

/// Writes an item that must not exist yet; `Conflict` when one with its key does.
pub(crate) async fn put_new(
    store: &crate::Store,
    table: &str,
    item: impl serde::Serialize,
) -> Result<(), StoreError> {
    store
        .dynamo
        .put_item()
        .table_name(table)
        .set_item(Some(serde_dynamo::to_item(item)?))
        .condition_expression("attribute_not_exists(PK)")
        .send()
        .await
        .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
    Ok(())
}

/// Every item a query matches, following its pages, decoded as `T`.
pub(crate) async fn query_all<T: serde::de::DeserializeOwned>(
    query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
) -> Result<Vec<T>, StoreError> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let page = query.clone().set_exclusive_start_key(start.take()).send().await.map_err(backend)?;
        for item in page.items.unwrap_or_default() {
            items.push(serde_dynamo::from_item(item)?);
        }
        match page.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return Ok(items),
        }
    }
}

/// Up to `limit` items of the `by_due` partition `partition` of `table` whose sort key is at or
/// before `until`, the oldest first, each as `T` (the due work of a job: what it deletes or
/// settles leaves the partition, so the next read starts where this one's work stopped).
pub(crate) async fn due_page<T: serde::de::DeserializeOwned>(
    store: &crate::Store,
    table: &str,
    partition: &str,
    until: String,
    limit: usize,
) -> Result<Vec<T>, StoreError> {
    let out = store
        .dynamo
        .query()
        .table_name(table)
        .index_name(crate::resources::BY_DUE)
        .key_condition_expression("GSI2PK = :p AND GSI2SK <= :until")
        .expression_attribute_values(":p", s(partition))
        .expression_attribute_values(":until", s(until))
        .scan_index_forward(true)
        .limit(i32::try_from(limit).unwrap_or(100))
        .send()
        .await
        .map_err(backend)?;
    out.items.unwrap_or_default().into_iter().map(|item| Ok(serde_dynamo::from_item(item)?)).collect()
}

/// A strongly consistent read of one item by its `PK`/`SK`, decoded as `T`.
pub(crate) async fn get_as<T: serde::de::DeserializeOwned>(
    store: &crate::Store,
    table: &str,
    pk: impl Into<String>,
    sk: impl Into<String>,
) -> Result<Option<T>, StoreError> {
    match get_item(store, table, pk, sk).await? {
        Some(item) => Ok(Some(serde_dynamo::from_item(item)?)),
        None => Ok(None),
    }
}

/// Writes `requests` to `table` 25 a call (BatchWriteItem). Unprocessed items are retried with
/// a growing pause a bounded number of times, then the write fails.
pub(crate) async fn batch_write(
    store: &crate::Store,
    table: &str,
    mut requests: Vec<aws_sdk_dynamodb::types::WriteRequest>,
) -> Result<(), StoreError> {
    let mut attempts = 0u64;
    while !requests.is_empty() {
        let batch: Vec<_> = requests.drain(..requests.len().min(25)).collect();
        let out =
            store.dynamo.batch_write_item().request_items(table, batch).send().await.map_err(backend)?;
        let unprocessed = out.unprocessed_items.and_then(|mut m| m.remove(table)).unwrap_or_default();
        if !unprocessed.is_empty() {
            attempts += 1;
            if attempts > 8 {
                return Err(StoreError::unavailable("batch write kept leaving items unprocessed"));
            }
            tokio::time::sleep(std::time::Duration::from_millis(20 * attempts)).await;
            requests.extend(unprocessed);
        }
    }
    Ok(())
}

/// Many items by `(PK, SK)` (BatchGetItem, 100 keys a call), decoded as `T`; missing ones are
/// left out. Unprocessed keys are retried a bounded number of times, then the read fails.
pub(crate) async fn batch_get_as<T: serde::de::DeserializeOwned>(
    store: &crate::Store,
    table: &str,
    keys: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<T>, StoreError> {
    batch_get(store, table, keys).await?.into_iter().map(|item| Ok(serde_dynamo::from_item(item)?)).collect()
}

/// [`batch_get_as`] without decoding: items of different kinds read in one call.
pub(crate) async fn batch_get(
    store: &crate::Store,
    table: &str,
    keys: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<std::collections::HashMap<String, AttributeValue>>, StoreError> {
    let keys: Vec<(String, String)> = keys.into_iter().collect();
    let mut found = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(100) {
        let keys = chunk
            .iter()
            .map(|(pk, sk)| {
                std::collections::HashMap::from([
                    ("PK".to_owned(), s(pk.as_str())),
                    ("SK".to_owned(), s(sk.as_str())),
                ])
            })
            .collect();
        let mut pending = Some(
            aws_sdk_dynamodb::types::KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .map_err(StoreError::unavailable)?,
        );
        for _ in 0..8 {
            let Some(request) = pending.take() else { break };
            let out =
                store.dynamo.batch_get_item().request_items(table, request).send().await.map_err(backend)?;
            found.extend(out.responses.and_then(|mut r| r.remove(table)).unwrap_or_default());
            pending = out.unprocessed_keys.and_then(|mut u| u.remove(table)).filter(|k| !k.keys().is_empty());
        }
        if pending.is_some() {
            return Err(StoreError::unavailable("batch read left keys unprocessed"));
        }
    }
    Ok(found)
}

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(crate) fn backend<E, R>(err: SdkError<E, R>) -> StoreError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    StoreError::Unavailable(DisplayErrorContext(err).to_string())
}

/// A conditional write that failed its condition is a `Conflict`; anything else is a backend
/// failure.
pub(crate) fn conditional<E, R>(err: SdkError<E, R>, is_condition_failure: impl Fn(&E) -> bool) -> StoreError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    if err.as_service_error().is_some_and(is_condition_failure) { StoreError::Conflict } else { backend(err) }
}

/// For TransactWriteItems: a cancellation whose reasons include a failed condition.
pub(crate) fn transaction_conflict(
    err: SdkError<
        aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError,
        aws_sdk_dynamodb::config::http::HttpResponse,
    >,
) -> StoreError {
    let cancelled = err.as_service_error().and_then(|e| match e {
        aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(c) => Some(c),
        _ => None,
    });
    match cancelled {
        Some(c) if c.cancellation_reasons().iter().any(|r| r.code() == Some("ConditionalCheckFailed")) => {
            StoreError::Conflict
        }
        _ => backend(err),
    }
}
