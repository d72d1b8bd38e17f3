//! The count backfill: environments and session files written before 0.2.0 (shape 1, no
//! `shape` attribute) are not in their project's counts, so a project's environment count and
//! stored bytes start low after an upgrade. The backfill brings every shape 1 item to shape 2:
//! in one transaction it marks the item counted and adds it to its count (an environment not
//! deleted: one place in `ENVS#COUNT`; a file: its size in `FILES#BYTES`). Each write is
//! conditional on the item still being shape 1, so a second pass, an overlapping pass or a
//! retried page counts nothing twice; a delete between the read and the write makes the write
//! fail and the item is skipped (deletes hold only while the item is counted as they read it,
//! so they never miss a place given back). The pass's position is saved after every page
//! (`JOB#count-backfill`), so an invocation that stops is continued by the next, and once the
//! scan reaches the end the job has nothing left to do.

use agentplane_domain::platform::workspace_sweep::ScanPosition;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};

use super::job_cursor::{self, Cursor};
use super::page::Item;
use super::s;
use crate::{Store, StoreError};

/// The shape of items written before shapes were recorded.
pub const FIRST_SHAPE: u32 = 1;
/// The shape of counted environments and files.
pub const COUNTED_SHAPE: u32 = 2;

pub(crate) fn first_shape() -> u32 {
    FIRST_SHAPE
}

const JOB: &str = "count-backfill";
/// Items a scan page evaluates.
const SCAN_PAGE: i32 = 200;

/// What a page of the backfill did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BackfillPage {
    /// Shape 1 items found.
    pub found: usize,
    /// Environments counted.
    pub environments: usize,
    /// Files whose bytes were counted.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Items brought to shape 2 with nothing to count (deleted environments, items counted
    /// by a build of 0.2.0 that wrote no shape).
    pub marked: usize,
    /// Items changed or deleted by somebody else meanwhile (nothing written).
    pub skipped: usize,
}

/// Where the backfill is.
pub async fn cursor(store: &Store) -> Result<Cursor, StoreError> {
    job_cursor::load(store, JOB).await
}

pub async fn save_cursor(store: &Store, at: &Cursor) -> Result<(), StoreError> {
    job_cursor::save(store, JOB, at).await
}

/// Backfills the shape 1 items of one scan page after `after`; answers what it did and where
/// the next page starts (`None`: the scan is through).
pub async fn page(
    store: &Store,
    after: Option<&ScanPosition>,
) -> Result<(BackfillPage, Option<ScanPosition>), StoreError> {
    let (items, next) = job_cursor::scan_page(
        store,
        after,
        SCAN_PAGE,
        "begins_with(PK, :project) AND (begins_with(SK, :env) OR contains(SK, :file)) \
         AND attribute_not_exists(shape)",
        &[(":project", "PROJECT#"), (":env", "ENV#"), (":file", "#FILE#")],
    )
    .await?;
    let mut report = BackfillPage::default();
    for item in items {
        let Some(kind) = Kind::of(&item) else { continue };
        report.found += 1;
        match backfill(store, &item, kind).await {
            Ok(Done::Counted) => match kind {
                Kind::Environment => report.environments += 1,
                Kind::File { size } => {
                    report.files += 1;
                    report.bytes += size;
                }
            },
            Ok(Done::Marked) => report.marked += 1,
            Err(StoreError::Conflict) => report.skipped += 1,
            Err(err) => return Err(err),
        }
    }
    Ok((report, next))
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Environment,
    File { size: u64 },
}

impl Kind {
    /// An environment (`ENV#{id}`, not a session link under it) or a session file
    /// (`SESSION#{sid}#FILE#{fid}`).
    fn of(item: &Item) -> Option<Self> {
        let sk = item.get("SK")?.as_s().ok()?;
        let parts: Vec<&str> = sk.split('#').collect();
        match parts.as_slice() {
            ["ENV", _] => Some(Kind::Environment),
            ["SESSION", _, "FILE", _] => {
                let size = item.get("file")?.as_m().ok()?.get("size")?.as_n().ok()?.parse().ok()?;
                Some(Kind::File { size })
            }
            _ => None,
        }
    }
}

enum Done {
    Counted,
    Marked,
}

fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// Brings one shape 1 item to shape 2, counting it unless it is counted already (or, for an
/// environment, deleted).
async fn backfill(store: &Store, item: &Item, kind: Kind) -> Result<Done, StoreError> {
    let table = &store.names.main_table;
    let (Some(pk), Some(sk)) = (item.get("PK").cloned(), item.get("SK").cloned()) else {
        return Err(StoreError::Corrupt("a scanned item without its key".into()));
    };
    let (marker, counts) = match kind {
        Kind::Environment => ("counted", !item.contains_key("counted") && !item.contains_key("deleted_at")),
        Kind::File { .. } => ("bytes_counted", !item.contains_key("bytes_counted")),
    };
    let mark = Update::builder()
        .table_name(table)
        .key("PK", pk.clone())
        .key("SK", sk)
        .expression_attribute_names("#shape", "shape")
        .expression_attribute_values(":shape", n(u64::from(COUNTED_SHAPE)));
    if !counts {
        // Counted already (or deleted): only the shape is new.
        let mark = mark
            .update_expression("SET #shape = :shape")
            .condition_expression("attribute_exists(PK) AND attribute_not_exists(#shape)")
            .build()
            .map_err(StoreError::unavailable)?;
        let tx = store
            .dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(mark).build());
        super::counted::send(tx).await?;
        return Ok(Done::Marked);
    }
    let mut condition =
        "attribute_exists(PK) AND attribute_not_exists(#shape) AND attribute_not_exists(#marker)".to_owned();
    if matches!(kind, Kind::Environment) {
        condition.push_str(" AND attribute_not_exists(deleted_at)");
    }
    let mark = mark
        .expression_attribute_names("#marker", marker)
        .update_expression("SET #shape = :shape, #marker = :true")
        .condition_expression(condition)
        .expression_attribute_values(":true", AttributeValue::Bool(true))
        .build()
        .map_err(StoreError::unavailable)?;
    let project = pk.as_s().map_err(|_| StoreError::Corrupt("PK".into()))?.clone();
    let count = match kind {
        Kind::Environment => Update::builder()
            .table_name(table)
            .key("PK", s(project))
            .key("SK", s(super::environments::COUNT_SK))
            .update_expression("ADD #count :one")
            .expression_attribute_names("#count", super::environments::COUNT_ATTR)
            .expression_attribute_values(":one", n(1)),
        Kind::File { size } => Update::builder()
            .table_name(table)
            .key("PK", s(project))
            .key("SK", s(super::files::BYTES_SK))
            .update_expression("ADD #count :size")
            .expression_attribute_names("#count", super::files::BYTES_ATTR)
            .expression_attribute_values(":size", n(size)),
    }
    .build()
    .map_err(StoreError::unavailable)?;
    let tx = store
        .dynamo
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().update(mark).build())
        .transact_items(TransactWriteItem::builder().update(count).build());
    super::counted::send(tx).await?;
    Ok(Done::Counted)
}
