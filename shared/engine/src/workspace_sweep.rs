//! The retention of the workspaces bucket, one bounded step of the retention sweep: a
//! mark-and-sweep cycle (its rules and why it never deletes what a checkpoint relies on:
//! `agentplane_domain::platform::workspace_sweep`) that goes on page after page across
//! invocations from its cursor item.
//!
//! Round trips of one page:
//! - **mark**: 1 Scan of the main table (`scan_page` items evaluated, consistent) + 1
//!   BatchGetItem of the page's manifest marks (⌈ids / 100⌉) + 1 S3 GET for each manifest not
//!   marked yet + ⌈distinct blobs of those / 25⌉ BatchWriteItem + ⌈new manifests / 25⌉
//!   BatchWriteItem of their marks + 1 conditional PutItem of the cursor. A page of items naming manifests already
//!   marked (most: a Run's start is the previous Run's end) is 3 round trips.
//! - **sweep**: 1 ListObjectsV2 (`list_page` keys, ≤ 1,000) + 1 Query of the cycle's marks in
//!   the page's key range (more only past 1 MB of marks) + 1 conditional PutItem of the cursor
//!   (the claim) + 1 DeleteObjects when the page has anything to delete: 4 round trips.
//!
//! Plus 1 GetItem of the cursor per pass.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agentplane_domain::Timestamp;
use agentplane_domain::platform::manifest::Manifest;
use agentplane_domain::platform::workspace_sweep::{self, Cycle, DELETE_WITHIN_MS, Next, Phase, Swept};

use crate::ports::PortError;
use crate::ports::blobs::{Blobs, Listed};
use crate::ports::sweeps::WorkspaceSweepStore;

/// How much one pass does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Items one Scan of the main table evaluates.
    pub scan_page: usize,
    /// Keys one listing of the bucket takes (at most 1,000: one DeleteObjects).
    pub list_page: usize,
    /// Pages one pass works at most; the rest waits for the next pass.
    pub max_pages: usize,
    /// No page is started this long after the pass began (the function's timeout is 50 s and
    /// the sweep's other duties come first).
    pub budget: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { scan_page: 100, list_page: 1_000, max_pages: 20, budget: Duration::from_secs(25) }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkspaceReport {
    /// Pages worked (each advanced the cursor).
    pub pages: usize,
    /// Referenced manifests this pass marked, with their blobs.
    pub manifests_marked: usize,
    pub blobs_deleted: usize,
    pub manifests_deleted: usize,
    /// Objects a page would have deleted but left because its deletes came too late after its
    /// listing (the next cycle looks again).
    pub deferred: usize,
    /// Whether the pass stopped because another sweep moved the cursor first.
    pub raced: bool,
}

/// One pass at `now` over the workspaces bucket `bucket`, at most `limits.max_pages` pages of
/// the current cycle (or of a new one, when it is due). A storage failure is an `Err`; the
/// cursor stays where the last finished page left it.
pub async fn sweep_workspaces<S: WorkspaceSweepStore>(
    store: &S,
    bucket: &impl Blobs,
    now: Timestamp,
    limits: Limits,
) -> Result<WorkspaceReport, PortError> {
    let mut report = WorkspaceReport::default();
    let stored = store.sweep_cursor().await?;
    let Some(mut cycle) = Cycle::to_work_on(stored.as_ref(), now) else {
        return Ok(report);
    };
    let began = Instant::now();
    for _ in 0..limits.max_pages {
        if began.elapsed() > limits.budget {
            break;
        }
        let next = match &cycle.phase {
            Phase::Done { .. } => break,
            Phase::Mark { after } => {
                let (referenced, next) =
                    store.checkpoint_references(after.as_ref(), limits.scan_page).await?;
                report.manifests_marked += mark(store, bucket, &cycle, &referenced, now).await?;
                cycle.advanced(Next::Scan(next), now)
            }
            Phase::Sweep { kind, after } => {
                let listed_at = Instant::now();
                let (listed, more) =
                    bucket.list_page(kind.prefix(), after.as_deref(), limits.list_page).await?;
                let doomed = doomed(store, &cycle, *kind, &listed).await?;
                let last = if more { listed.last().map(|l| l.key.clone()) } else { None };
                let next = cycle.advanced(Next::Key(last), now);
                // The claim: of two sweeps that listed this page, one deletes.
                if let Err(err) = store.advance_sweep(&next).await {
                    return finish(report, err);
                }
                report.pages += 1;
                let deleted = if doomed.is_empty() {
                    0
                } else if listed_at.elapsed() > Duration::from_millis(DELETE_WITHIN_MS.unsigned_abs()) {
                    tracing::warn!(
                        count = doomed.len(),
                        "workspace sweep page too slow: its deletes wait a cycle"
                    );
                    report.deferred += doomed.len();
                    0
                } else {
                    bucket.delete_many(&doomed).await?
                };
                match kind {
                    Swept::Blobs => report.blobs_deleted += deleted,
                    Swept::Manifests => report.manifests_deleted += deleted,
                }
                cycle = next;
                continue;
            }
        };
        if let Err(err) = store.advance_sweep(&next).await {
            return finish(report, err);
        }
        report.pages += 1;
        cycle = next;
    }
    Ok(report)
}

/// A cursor write that lost to another sweep ends the pass (that sweep goes on); anything else
/// is a failure.
fn finish(mut report: WorkspaceReport, err: PortError) -> Result<WorkspaceReport, PortError> {
    match err {
        PortError::Conflict => {
            report.raced = true;
            Ok(report)
        }
        err => Err(err),
    }
}

/// Marks the manifests of `referenced` not marked yet in `cycle`, each blob before its manifest
/// (a marked manifest has all its blobs marked, whatever stopped a pass). Answers how many.
/// A referenced manifest that cannot be read stops the cycle (its blobs are unknown, so none may
/// be deleted); one that is missing has nothing to keep.
async fn mark<S: WorkspaceSweepStore>(
    store: &S,
    bucket: &impl Blobs,
    cycle: &Cycle,
    referenced: &BTreeSet<String>,
    now: Timestamp,
) -> Result<usize, PortError> {
    if referenced.is_empty() {
        return Ok(0);
    }
    let marked = store.marked_manifests(cycle.number, referenced).await?;
    let fresh: Vec<&String> = referenced.iter().filter(|id| !marked.contains(*id)).collect();
    // The page's manifests share most blobs (a Run starts where the one before ended).
    let mut blobs: BTreeSet<String> = BTreeSet::new();
    for id in &fresh {
        let body = match bucket.get(&Manifest::key(id)).await {
            Ok(body) => body,
            Err(PortError::NotFound) => {
                tracing::warn!(manifest = %id, "a referenced manifest is missing from the workspaces bucket");
                continue;
            }
            Err(err) => return Err(err),
        };
        let manifest: Manifest =
            serde_json::from_slice(&body).map_err(|e| PortError::Corrupt(format!("manifest {id}: {e}")))?;
        blobs.extend(manifest.files.into_values().map(|e| e.sha256));
    }
    let blob_digests: Vec<&str> = blobs.iter().map(String::as_str).collect();
    store.mark(cycle.number, Swept::Blobs, &blob_digests, now).await?;
    let manifest_ids: Vec<&str> = fresh.iter().map(|id| id.as_str()).collect();
    store.mark(cycle.number, Swept::Manifests, &manifest_ids, now).await?;
    Ok(fresh.len())
}

/// The keys of `listed` the sweep of `cycle` deletes: ours, unmarked, and old enough.
async fn doomed<S: WorkspaceSweepStore>(
    store: &S,
    cycle: &Cycle,
    kind: Swept,
    listed: &[Listed],
) -> Result<Vec<String>, PortError> {
    let ours: Vec<(&str, &Listed)> =
        listed.iter().filter_map(|l| kind.digest_of(&l.key).map(|d| (d, l))).collect();
    let (Some(first), Some(last)) = (ours.iter().map(|(d, _)| *d).min(), ours.iter().map(|(d, _)| *d).max())
    else {
        return Ok(Vec::new());
    };
    // Only the old ones need their marks looked up.
    if !ours.iter().any(|(_, l)| workspace_sweep::deletable(l.written, false, cycle.started_at)) {
        return Ok(Vec::new());
    }
    let marked = store.marked_between(cycle.number, kind, first, last).await?;
    Ok(ours
        .into_iter()
        .filter(|(d, l)| workspace_sweep::deletable(l.written, marked.contains(*d), cycle.started_at))
        .map(|(_, l)| l.key.clone())
        .collect())
}
