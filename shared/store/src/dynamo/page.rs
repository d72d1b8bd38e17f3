//! Keyset pages over the `by_created` index.

use std::collections::HashMap;

use agentplane_domain::page::{Order, Page, PageLimit, PageRequest};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::de::DeserializeOwned;

use super::{backend, s};
use crate::resources::BY_CREATED;
use crate::{Store, StoreError};

pub type Item = HashMap<String, AttributeValue>;

/// Where a page starts: the full key (table and index attributes) of the cursor item.
pub fn start_key(item: &Item) -> Option<Item> {
    let mut key = Item::new();
    for attr in ["PK", "SK", "GSI1PK", "GSI1SK"] {
        key.insert(attr.to_owned(), item.get(attr)?.clone());
    }
    Some(key)
}

/// One page of the `list` partition of `by_created`, after `start` (exclusive).
pub async fn query_created<T: DeserializeOwned>(
    store: &Store,
    list: &str,
    start: Option<Item>,
    limit: PageLimit,
    order: Order,
) -> Result<Page<T>, StoreError> {
    query_index(store, BY_CREATED, "GSI1PK", list, start, limit, order).await
}

/// One page of an entity's `list` partition of `by_created`, after the item `after` reads (the
/// cursor's own item: one that names nothing is `NotFound`), each item made a `T` by `into`.
pub async fn created_after<I: DeserializeOwned, T>(
    store: &Store,
    list: &str,
    after: Option<impl Future<Output = Result<Item, StoreError>>>,
    page: &PageRequest,
    into: impl FnMut(I) -> T,
) -> Result<Page<T>, StoreError> {
    // Both reads boxed: held in the list's future, either would make it too large to keep on
    // the stack.
    let start = match after {
        Some(item) => Some(start_key(&Box::pin(item).await?).ok_or(StoreError::NotFound)?),
        None => None,
    };
    let found: Page<I> = Box::pin(query_created(store, list, start, page.limit, page.order)).await?;
    Ok(Page { items: found.items.into_iter().map(into).collect(), has_more: found.has_more })
}

/// One page of the `list` partition (attribute `partition`) of `index`, after `start`.
pub async fn query_index<T: DeserializeOwned>(
    store: &Store,
    index: &str,
    partition: &str,
    list: &str,
    start: Option<Item>,
    limit: PageLimit,
    order: Order,
) -> Result<Page<T>, StoreError> {
    let query = store
        .dynamo
        .query()
        .table_name(&store.names.main_table)
        .index_name(index)
        .key_condition_expression("#p = :list")
        .expression_attribute_names("#p", partition)
        .expression_attribute_values(":list", s(list))
        .scan_index_forward(order == Order::Asc);
    keyset_page(query, limit, start, |item| Ok(serde_dynamo::from_item(item)?)).await
}

/// Collects one keyset page of `query` from `start`: follows `LastEvaluatedKey` until one item
/// more than `limit` is in hand (that one tells whether there is a next page) or the range ends.
pub async fn keyset_page<T>(
    query: QueryFluentBuilder,
    limit: PageLimit,
    start: Option<Item>,
    decode: impl Fn(Item) -> Result<T, StoreError>,
) -> Result<Page<T>, StoreError> {
    let wanted = limit.get();
    let mut items = Vec::with_capacity(wanted + 1);
    let mut start = start;
    while items.len() <= wanted {
        let room = i32::try_from(wanted + 1 - items.len()).unwrap_or(101);
        let out =
            query.clone().limit(room).set_exclusive_start_key(start.take()).send().await.map_err(backend)?;
        for item in out.items.unwrap_or_default() {
            items.push(decode(item)?);
        }
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => break,
        }
    }
    let has_more = items.len() > wanted;
    items.truncate(wanted);
    Ok(Page { items, has_more })
}
