//! The live-sandbox cap: a project's sandboxes made through the sandbox API that are running or
//! paused, at most `max` at once.
//!
//! | item   | PK              | SK               | attributes                      |
//! |--------|-----------------|------------------|---------------------------------|
//! | ledger | `PROJECT#{pid}` | `SANDBOXES#LIVE` | `live` (sandbox ids), `version` |
//!
//! The ledger lists the sandboxes a create counted. A create reads it, reads those sandboxes
//! (one batch read) and keeps the ones still live at `now` (a sandbox that ended, by a kill, its
//! deadline or its node, leaves the ledger at the next create: nothing has to remember to give
//! a place back, so no place is ever lost). Under the cap, the new sandbox and the ledger (its
//! `version` as read) are written in one transaction, so concurrent creates at the cap make
//! exactly one sandbox; a create that loses the ledger to another reads it again. A project
//! with no ledger yet (its first create since 0.2.0) starts it from its newest sandboxes.

use agentplane_domain::page::PageLimit;
use agentplane_domain::sandbox::{ENVIRONMENT_METADATA_KEY, Sandbox, SandboxId};
use agentplane_domain::{ProjectId, Timestamp};
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use serde::{Deserialize, Serialize};

use super::keys::project_pk;
use super::sandboxes::{SANDBOX_SK, SandboxItem, sandbox_pk};
use crate::{Store, StoreError};

const LEDGER_SK: &str = "SANDBOXES#LIVE";
/// Reads of the ledger lost to a concurrent create before the create gives up.
const ATTEMPTS: usize = 8;

#[derive(Serialize, Deserialize)]
struct Ledger {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    live: Vec<SandboxId>,
    version: u64,
}

/// Whether a sandbox counts toward the cap: one the sandbox API made (not a Session's managed
/// compute, not an environment's workspace).
pub fn capped(sandbox: &Sandbox) -> bool {
    sandbox.session_id.is_none() && !sandbox.metadata.as_map().contains_key(ENVIRONMENT_METADATA_KEY)
}

/// Why a capped create made nothing.
#[derive(Debug, thiserror::Error)]
pub enum CapError {
    /// The project has `max` live sandboxes already.
    #[error("the project has {max} live sandboxes already")]
    Full { max: u32 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Records `sandbox` (new) if its project has fewer than `max` live capped sandboxes at `now`.
pub(crate) async fn create(
    store: &Store,
    item: SandboxItem,
    sandbox: &Sandbox,
    max: u32,
    now: Timestamp,
) -> Result<(), CapError> {
    let table = &store.names.main_table;
    let project = &sandbox.project_id;
    let item: super::page::Item = serde_dynamo::to_item(item).map_err(StoreError::from)?;
    for _ in 0..ATTEMPTS {
        let ledger: Option<Ledger> = super::get_as(store, table, project_pk(project), LEDGER_SK).await?;
        let read_version = ledger.as_ref().map(|l| l.version);
        let mut live = match ledger {
            Some(ledger) => still_live(store, ledger.live, now).await?,
            None => seed(store, project, now).await?,
        };
        if live.len() >= usize::try_from(max).unwrap_or(usize::MAX) {
            return Err(CapError::Full { max });
        }
        live.push(sandbox.id.clone());
        let ledger = Ledger {
            pk: project_pk(project),
            sk: LEDGER_SK.into(),
            live,
            version: read_version.map_or(1, |v| v + 1),
        };
        let mut put_ledger = Put::builder()
            .table_name(table)
            .set_item(Some(serde_dynamo::to_item(ledger).map_err(StoreError::from)?));
        put_ledger = match read_version {
            Some(v) => put_ledger.condition_expression("version = :read").expression_attribute_values(
                ":read",
                aws_sdk_dynamodb::types::AttributeValue::N(v.to_string()),
            ),
            None => put_ledger.condition_expression("attribute_not_exists(PK)"),
        };
        let put_sandbox = Put::builder()
            .table_name(table)
            .set_item(Some(item.clone()))
            .condition_expression("attribute_not_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)?;
        let tx = store
            .dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put_sandbox).build())
            .transact_items(
                TransactWriteItem::builder()
                    .put(put_ledger.build().map_err(StoreError::unavailable)?)
                    .build(),
            );
        match super::counted::send(tx).await {
            Ok(()) => return Ok(()),
            // Another create moved the ledger first: read it again.
            Err(StoreError::Conflict) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(StoreError::unavailable("the project's live-sandbox ledger kept being contended").into())
}

/// The ids of `ids` whose sandboxes are still live at `now`.
async fn still_live(
    store: &Store,
    ids: Vec<SandboxId>,
    now: Timestamp,
) -> Result<Vec<SandboxId>, StoreError> {
    if ids.is_empty() {
        return Ok(ids);
    }
    let keys = ids.iter().map(|id| (sandbox_pk(id), SANDBOX_SK.to_owned()));
    let items: Vec<SandboxItem> = super::batch_get_as(store, &store.names.main_table, keys).await?;
    let mut live: Vec<SandboxId> =
        items.into_iter().map(|i| i.sandbox).filter(|s| is_live(s, now)).map(|s| s.id).collect();
    // The ledger's order, so that a ledger read twice is written the same.
    live.sort_by_key(|id| ids.iter().position(|x| x == id));
    Ok(live)
}

/// A new ledger: the project's newest capped sandboxes that are live at `now`.
async fn seed(store: &Store, project: &ProjectId, now: Timestamp) -> Result<Vec<SandboxId>, StoreError> {
    // The project's newest page: older sandboxes have ended (a sandbox lives an hour at most
    // unless paused).
    let limit = PageLimit::new(i64::from(PageLimit::MAX)).unwrap_or(PageLimit::DEFAULT);
    let newest = super::sandboxes::Sandboxes::new(store).list(project, limit).await?;
    Ok(newest.into_iter().filter(|s| capped(s) && is_live(s, now)).map(|s| s.id).collect())
}

fn is_live(sandbox: &Sandbox, now: Timestamp) -> bool {
    !sandbox.lifecycle.effective(now).is_final()
}
