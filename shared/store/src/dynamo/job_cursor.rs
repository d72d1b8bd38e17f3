//! Where a resumable pass over the main table stopped: one item per job (`JOB#{name}` /
//! `CURSOR`) holding the scan's last evaluated key, or `done` once a one-time pass has reached
//! the end. The re-seal pass and the count backfill keep their positions here, and both read
//! their pages with [`scan_page`].

use std::collections::HashMap;

use agentplane_domain::platform::workspace_sweep::ScanPosition;
use serde::{Deserialize, Serialize};

use super::page::Item;
use super::{backend, s};
use crate::{Store, StoreError};

const CURSOR_SK: &str = "CURSOR";

/// Where a pass is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cursor {
    /// No pass under way: the next one starts at the beginning.
    Start,
    /// A pass stopped after this key.
    After(ScanPosition),
    /// A one-time pass reached the end: there is nothing left to do.
    Done,
}

#[derive(Serialize, Deserialize)]
struct CursorItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at_pk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at_sk: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    done: bool,
}

fn cursor_pk(job: &str) -> String {
    format!("JOB#{job}")
}

/// The job's position.
pub(crate) async fn load(store: &Store, job: &str) -> Result<Cursor, StoreError> {
    let item: Option<CursorItem> =
        super::get_as(store, &store.names.main_table, cursor_pk(job), CURSOR_SK).await?;
    Ok(match item {
        None => Cursor::Start,
        Some(i) if i.done => Cursor::Done,
        Some(CursorItem { at_pk: Some(pk), at_sk: Some(sk), .. }) => Cursor::After(ScanPosition { pk, sk }),
        Some(_) => Cursor::Start,
    })
}

/// Records the job's position (`Start` removes the item: the next pass starts over).
pub(crate) async fn save(store: &Store, job: &str, at: &Cursor) -> Result<(), StoreError> {
    let table = &store.names.main_table;
    let (at_pk, at_sk, done) = match at {
        Cursor::Start => {
            store
                .dynamo
                .delete_item()
                .table_name(table)
                .key("PK", s(cursor_pk(job)))
                .key("SK", s(CURSOR_SK))
                .send()
                .await
                .map_err(backend)?;
            return Ok(());
        }
        Cursor::After(p) => (Some(p.pk.clone()), Some(p.sk.clone()), false),
        Cursor::Done => (None, None, true),
    };
    let item = CursorItem { pk: cursor_pk(job), sk: CURSOR_SK.into(), at_pk, at_sk, done };
    store
        .dynamo
        .put_item()
        .table_name(table)
        .set_item(Some(serde_dynamo::to_item(item)?))
        .send()
        .await
        .map_err(backend)?;
    Ok(())
}

/// One page of a consistent scan of the main table after `after` (`limit` items evaluated,
/// those `filter` keeps returned), and where the next page starts (`None`: this was the last).
pub(crate) async fn scan_page(
    store: &Store,
    after: Option<&ScanPosition>,
    limit: i32,
    filter: &str,
    values: &[(&str, &str)],
) -> Result<(Vec<Item>, Option<ScanPosition>), StoreError> {
    let start = after.map(|p| HashMap::from([("PK".to_owned(), s(&p.pk)), ("SK".to_owned(), s(&p.sk))]));
    let mut scan = store
        .dynamo
        .scan()
        .table_name(&store.names.main_table)
        .consistent_read(true)
        .limit(limit)
        .set_exclusive_start_key(start)
        .filter_expression(filter);
    for (name, value) in values {
        scan = scan.expression_attribute_values(*name, s(*value));
    }
    let out = scan.send().await.map_err(backend)?;
    let next = out.last_evaluated_key.filter(|k| !k.is_empty()).and_then(|key| {
        let text = |name: &str| key.get(name).and_then(|v| v.as_s().ok()).cloned();
        Some(ScanPosition { pk: text("PK")?, sk: text("SK")? })
    });
    Ok((out.items.unwrap_or_default(), next))
}
