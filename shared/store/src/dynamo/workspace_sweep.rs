//! The retention sweep of the workspaces bucket: its cursor, its marks, and the scan for the
//! manifests environment and Run items reference.
//!
//! | item   | PK                        | SK                  | attributes                         |
//! |--------|---------------------------|---------------------|------------------------------------|
//! | cursor | `WORKSPACES#SWEEP`        | `CURSOR`            | the cycle (number, phase, version) |
//! | mark   | `WORKSPACES#SWEEP#{cycle}`| `BLOB#{sha256}`     | `expires_at` (TTL, Unix seconds)   |
//! | mark   | `WORKSPACES#SWEEP#{cycle}`| `MANIFEST#{id}`     | `expires_at`                       |
//!
//! The cursor is written conditionally on the version read, so of two sweeps one advances and
//! the other stops. A cycle's marks are one partition, read in key ranges beside a listing of
//! the bucket (both in key order); they expire with the TTL.

use std::collections::{BTreeSet, HashMap};

use agentplane_domain::Timestamp;
use agentplane_domain::platform::workspace_sweep::{self, Cycle, MARK_TTL_SECONDS, ScanPosition, Swept};
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use serde::{Deserialize, Serialize};

use super::{backend, batch_get, batch_write, conditional, get_as, s};
use crate::{Store, StoreError};

const CURSOR_PK: &str = "WORKSPACES#SWEEP";
const CURSOR_SK: &str = "CURSOR";

fn marks_pk(cycle: u64) -> String {
    format!("WORKSPACES#SWEEP#{cycle}")
}
fn mark_prefix(kind: Swept) -> &'static str {
    match kind {
        Swept::Blobs => "BLOB#",
        Swept::Manifests => "MANIFEST#",
    }
}

#[derive(Serialize, Deserialize)]
struct CursorItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(flatten)]
    cycle: Cycle,
}

pub struct WorkspaceSweep<'a> {
    store: &'a Store,
}

impl<'a> WorkspaceSweep<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    /// The stored cursor (a strongly consistent read); `None` before the first cycle.
    pub async fn cursor(&self) -> Result<Option<Cycle>, StoreError> {
        let item: Option<CursorItem> = get_as(self.store, self.table(), CURSOR_PK, CURSOR_SK).await?;
        Ok(item.map(|i| i.cycle))
    }

    /// Stores `next` if the cursor is still at `next.version - 1` (or absent, for a first
    /// write at version 1); `Conflict` when another sweep moved it first.
    pub async fn advance(&self, next: &Cycle) -> Result<(), StoreError> {
        let item = CursorItem { pk: CURSOR_PK.into(), sk: CURSOR_SK.into(), cycle: next.clone() };
        let put = self
            .store
            .dynamo
            .put_item()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(item)?));
        let expected = next.version.saturating_sub(1);
        let put = if expected == 0 {
            put.condition_expression("attribute_not_exists(PK) OR version = :v")
        } else {
            put.condition_expression("version = :v")
        };
        put.expression_attribute_values(":v", AttributeValue::N(expected.to_string()))
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    /// One page of the main table (at most `limit` items evaluated, a strongly consistent
    /// Scan): the manifests the environment and Run items of the page reference, and where the
    /// scan goes on (`None`: it is through).
    pub async fn references(
        &self,
        after: Option<&ScanPosition>,
        limit: usize,
    ) -> Result<(BTreeSet<String>, Option<ScanPosition>), StoreError> {
        let start = after.map(|p| HashMap::from([("PK".to_owned(), s(&p.pk)), ("SK".to_owned(), s(&p.sk))]));
        let out = self
            .store
            .dynamo
            .scan()
            .table_name(self.table())
            .consistent_read(true)
            .limit(i32::try_from(limit).unwrap_or(100).max(1))
            .set_exclusive_start_key(start)
            .filter_expression(
                "attribute_exists(initial_checkpoint) OR attribute_exists(start_manifest) \
                 OR attribute_exists(#cp.snapshot_id) OR attribute_exists(#rb.#m)",
            )
            .projection_expression("initial_checkpoint, start_manifest, #cp.snapshot_id, #rb.#m")
            .expression_attribute_names("#cp", "checkpoint")
            .expression_attribute_names("#rb", "rollback")
            .expression_attribute_names("#m", "manifest")
            .send()
            .await
            .map_err(backend)?;
        let mut values = Vec::new();
        for item in out.items() {
            let nested = |map: &str, field: &str| {
                item.get(map)
                    .and_then(|v| v.as_m().ok())
                    .and_then(|m| m.get(field))
                    .and_then(|v| v.as_s().ok())
            };
            let top = |field: &str| item.get(field).and_then(|v| v.as_s().ok());
            values.extend(
                [
                    top("initial_checkpoint"),
                    top("start_manifest"),
                    nested("checkpoint", "snapshot_id"),
                    nested("rollback", "manifest"),
                ]
                .into_iter()
                .flatten()
                .cloned(),
            );
        }
        let next = out.last_evaluated_key().and_then(|key| {
            let pk = key.get("PK")?.as_s().ok()?.clone();
            let sk = key.get("SK")?.as_s().ok()?.clone();
            Some(ScanPosition { pk, sk })
        });
        Ok((workspace_sweep::referenced(values.iter().map(String::as_str)), next))
    }

    /// Which of the manifest `ids` are marked in `cycle` (BatchGetItem, 100 a call).
    pub async fn marked_manifests(
        &self,
        cycle: u64,
        ids: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, StoreError> {
        let prefix = mark_prefix(Swept::Manifests);
        let keys = ids.iter().map(|id| (marks_pk(cycle), format!("{prefix}{id}")));
        let found = batch_get(self.store, self.table(), keys).await?;
        Ok(found
            .iter()
            .filter_map(|item| item.get("SK")?.as_s().ok()?.strip_prefix(prefix).map(str::to_owned))
            .collect())
    }

    /// Marks `digests` of `kind` in `cycle` (BatchWriteItem, 25 a call).
    pub async fn mark<'d>(
        &self,
        cycle: u64,
        kind: Swept,
        digests: impl IntoIterator<Item = &'d str>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let expires = AttributeValue::N(now.plus_seconds(MARK_TTL_SECONDS).unix_seconds().to_string());
        let requests = digests
            .into_iter()
            .map(|d| {
                let item = HashMap::from([
                    ("PK".to_owned(), s(marks_pk(cycle))),
                    ("SK".to_owned(), s(format!("{}{d}", mark_prefix(kind)))),
                    (crate::resources::TTL_ATTRIBUTE.to_owned(), expires.clone()),
                ]);
                let put =
                    PutRequest::builder().set_item(Some(item)).build().map_err(StoreError::unavailable)?;
                Ok(WriteRequest::builder().put_request(put).build())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        batch_write(self.store, self.table(), requests).await
    }

    /// The digests of `kind` marked in `cycle` from `first` through `last` (one Query, more only
    /// past 1 MB of marks: about 10,000).
    pub async fn marked_between(
        &self,
        cycle: u64,
        kind: Swept,
        first: &str,
        last: &str,
    ) -> Result<BTreeSet<String>, StoreError> {
        let prefix = mark_prefix(kind);
        let mut marked = BTreeSet::new();
        let mut start = None;
        loop {
            let out = self
                .store
                .dynamo
                .query()
                .table_name(self.table())
                .consistent_read(true)
                .key_condition_expression("PK = :pk AND SK BETWEEN :first AND :last")
                .expression_attribute_values(":pk", s(marks_pk(cycle)))
                .expression_attribute_values(":first", s(format!("{prefix}{first}")))
                .expression_attribute_values(":last", s(format!("{prefix}{last}")))
                .projection_expression("SK")
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(backend)?;
            marked.extend(
                out.items()
                    .iter()
                    .filter_map(|i| i.get("SK")?.as_s().ok()?.strip_prefix(prefix).map(str::to_owned)),
            );
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(marked),
            }
        }
    }
}
