//! The purge of deleted Platform environments, one step of the retention sweep.
//! `DELETE /v1/environments/{id}` only marks the environment deleted (from then on it, its
//! sessions' links and its Runs read as gone); this step removes what it held, in an order a
//! retry can always resume from (every step is idempotent, and the environment item, which
//! names what is left, goes last):
//!
//! 1. its sandbox ends (the engine's [`Compute`] port);
//! 2. the manifests it and its Runs referenced are recorded on the environment item, and the
//!    item's own references are removed;
//! 3. its Runs go (their items and their saved transcripts), then its sessions' links;
//! 4. of its checkpoints, the manifests no live environment or Run references, and the blobs
//!    no live manifest names, are deleted from the workspaces bucket — only those last written
//!    more than the workspace sweep's grace before `now` (`workspace_sweep::deletable`): a
//!    checkpoint elsewhere may be relying on a younger blob it found (the same content in
//!    another environment), and the safety argument of `agentplane_domain::platform::
//!    workspace_sweep` holds for these deletes as for the sweep's. The younger ones are
//!    unreferenced once the items are gone, so the workspace sweep deletes them after the grace;
//! 5. the environment item.
//!
//! Cost: step 4 reads every live reference (a Scan of the main table, like the workspace
//! sweep's mark) and every live manifest until each candidate blob is known to be shared or
//! not, once per purged environment that had checkpoints.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agentplane_domain::Timestamp;
use agentplane_domain::platform::Environment;
use agentplane_domain::platform::manifest::{Manifest, blob_key};
use agentplane_domain::platform::workspace_sweep::{self, DELETE_WITHIN_MS};
use futures_util::{StreamExt, TryStreamExt};

use crate::ports::blobs::{Blobs, DELETE_BATCH};
use crate::ports::sweeps::EnvironmentPurgeStore;
use crate::ports::{Compute, PortError};

/// Deleted environments one pass purges at most (the rest wait for the next pass).
pub const PAGE: usize = 10;
/// Runs read (and deleted) a page.
const RUNS_PAGE: usize = 100;
/// Main-table items one page of the reference scan evaluates.
const SCAN_PAGE: usize = 500;
/// Bucket look-ups at once.
const IN_FLIGHT: usize = 32;

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeReport {
    /// Environments purged to the end (their item deleted).
    pub environments: usize,
    /// Sandboxes ended.
    pub sandboxes_ended: usize,
    pub runs_deleted: usize,
    pub links_deleted: usize,
    pub manifests_deleted: usize,
    pub blobs_deleted: usize,
    /// Unreferenced objects left for the workspace sweep: written too recently to delete now.
    pub objects_left: usize,
    /// Environments whose purge failed this pass (logged; the next pass resumes them).
    pub failed: usize,
}

/// The object key of the session transcript a Run saved before it ran (for a rollback).
pub fn run_transcript_key(run: &agentplane_domain::platform::run::RunId) -> String {
    format!("runs/{run}/transcript.json")
}

/// One pass at `now`: purges up to [`PAGE`] deleted environments, the oldest deletion first.
pub async fn purge_deleted_environments<S: EnvironmentPurgeStore, C: Compute>(
    store: &S,
    compute: &C,
    now: Timestamp,
) -> Result<PurgeReport, PortError> {
    let mut report = PurgeReport::default();
    for environment in store.deleted_environments(now, PAGE).await? {
        match purge(store, compute, &environment, now, &mut report).await {
            Ok(()) => report.environments += 1,
            Err(err) => {
                tracing::warn!(error = %err, environment = %environment.id, "purging a deleted environment failed");
                report.failed += 1;
            }
        }
    }
    Ok(report)
}

/// Purges one deleted environment (the module's steps).
pub async fn purge<S: EnvironmentPurgeStore, C: Compute>(
    store: &S,
    compute: &C,
    environment: &Environment,
    now: Timestamp,
    report: &mut PurgeReport,
) -> Result<(), PortError> {
    let (project, id) = (&environment.project_id, &environment.id);
    if let Some(sandbox) = &environment.sandbox_id {
        match store.sandbox_record(sandbox).await {
            Ok(sandbox) if !sandbox.lifecycle.effective(now).is_final() => {
                compute.end(&sandbox).await;
                report.sandboxes_ended += 1;
            }
            Ok(_) | Err(PortError::NotFound) => {}
            Err(err) => return Err(err),
        }
    }
    let manifests = match &environment.purge_manifests {
        Some(manifests) => manifests.clone(),
        None => {
            let manifests = referenced(store, environment).await?;
            store.set_purge_manifests(project, id, &manifests).await?;
            manifests
        }
    };
    let bucket = store.workspaces().ok();
    let mut after = 0;
    loop {
        let runs = store.environment_runs(id, after, RUNS_PAGE).await?;
        for run in &runs {
            if let Some(bucket) = bucket {
                bucket.delete(&run_transcript_key(&run.id)).await?;
            }
            store.delete_run(project, &run.id).await?;
            report.runs_deleted += 1;
            after = after.max(run.environment_sequence);
        }
        if runs.len() < RUNS_PAGE {
            break;
        }
    }
    report.links_deleted += store.delete_environment_links(project, id).await?;
    if !manifests.is_empty() {
        let bucket = store.workspaces()?;
        delete_checkpoints(store, bucket, &manifests, now, report).await?;
    }
    store.delete_purged_environment(project, id).await
}

/// Every manifest the environment and its Runs reference, sorted, each once.
async fn referenced<S: EnvironmentPurgeStore>(
    store: &S,
    environment: &Environment,
) -> Result<Vec<String>, PortError> {
    let mut manifests: BTreeSet<String> = BTreeSet::new();
    manifests.extend(environment.initial_checkpoint.iter().cloned());
    manifests.extend(environment.rollback.iter().filter_map(|r| r.manifest.clone()));
    let mut after = 0;
    loop {
        let runs = store.environment_runs(&environment.id, after, RUNS_PAGE).await?;
        for run in &runs {
            manifests.extend(run.start_manifest.iter().cloned());
            manifests.extend(run.checkpoint.snapshot_id.iter().cloned());
            after = after.max(run.environment_sequence);
        }
        if runs.len() < RUNS_PAGE {
            return Ok(manifests.into_iter().collect());
        }
    }
}

/// Deletes the manifests of `candidates` no live item references and the blobs of those no
/// live manifest names, each only when old enough (the module's note).
async fn delete_checkpoints<S: EnvironmentPurgeStore>(
    store: &S,
    bucket: &impl Blobs,
    candidates: &[String],
    now: Timestamp,
    report: &mut PurgeReport,
) -> Result<(), PortError> {
    let live = live_references(store).await?;
    let orphans: Vec<&String> = candidates.iter().filter(|m| !live.contains(*m)).collect();
    let mut blobs: BTreeSet<String> = BTreeSet::new();
    for id in &orphans {
        if let Some(manifest) = read_manifest(bucket, id).await? {
            blobs.extend(manifest.files.into_values().map(|e| e.sha256));
        }
    }
    // A blob another live manifest names stays.
    for id in &live {
        if blobs.is_empty() {
            break;
        }
        if let Some(manifest) = read_manifest(bucket, id).await? {
            for entry in manifest.files.values() {
                blobs.remove(&entry.sha256);
            }
        }
    }
    let blob_keys: Vec<String> = blobs.iter().map(|sha| blob_key(sha)).collect();
    let manifest_keys: Vec<String> = orphans.iter().map(|id| Manifest::key(id)).collect();
    // Blobs first: a manifest still there names what a retried purge has left to delete.
    report.blobs_deleted += delete_old(bucket, &blob_keys, now, &mut report.objects_left).await?;
    report.manifests_deleted += delete_old(bucket, &manifest_keys, now, &mut report.objects_left).await?;
    Ok(())
}

/// The manifests every live environment and Run item references (a consistent Scan).
async fn live_references<S: EnvironmentPurgeStore>(store: &S) -> Result<BTreeSet<String>, PortError> {
    let mut live = BTreeSet::new();
    let mut after = None;
    loop {
        let (found, next) = store.checkpoint_references(after.as_ref(), SCAN_PAGE).await?;
        live.extend(found);
        match next {
            Some(next) => after = Some(next),
            None => return Ok(live),
        }
    }
}

async fn read_manifest(bucket: &impl Blobs, id: &str) -> Result<Option<Manifest>, PortError> {
    match bucket.get(&Manifest::key(id)).await {
        Ok(body) => serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| PortError::Corrupt(format!("manifest {id}: {e}"))),
        Err(PortError::NotFound) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Deletes those of `keys` last written more than the grace before `now`, each batch sent
/// within `DELETE_WITHIN_MS` of looking at its objects (a checkpoint that refreshed one
/// meanwhile then sees it gone and fails rather than rely on it); a slower batch is left to the
/// workspace sweep. Younger objects are counted in `left`. Answers how many were deleted.
async fn delete_old(
    bucket: &impl Blobs,
    keys: &[String],
    now: Timestamp,
    left: &mut usize,
) -> Result<usize, PortError> {
    let mut deleted = 0;
    for chunk in keys.chunks(DELETE_BATCH) {
        let looked = Instant::now();
        let written: Vec<(String, Option<Timestamp>)> = futures_util::stream::iter(
            chunk
                .iter()
                .cloned()
                .map(|key: String| async move { bucket.written_at(&key).await.map(|w| (key, w)) }),
        )
        .buffer_unordered(IN_FLIGHT)
        .try_collect()
        .await?;
        let mut old = Vec::new();
        for (key, written) in written {
            match written {
                Some(written) if workspace_sweep::deletable(written, false, now) => old.push(key),
                Some(_) => *left += 1,
                None => {}
            }
        }
        if old.is_empty() {
            continue;
        }
        if looked.elapsed() > Duration::from_millis(DELETE_WITHIN_MS.unsigned_abs()) {
            *left += old.len();
            continue;
        }
        deleted += bucket.delete_many(&old).await?;
    }
    Ok(deleted)
}
