//! Checkpoints of an environment's workspace. The node hashes `/workspace` and PUTs the listing
//! to a presigned URL; Core asks the workspaces bucket which blobs (`blobs/sha256/<hash>`) it
//! lacks; the node uploads just those with presigned PUTs (each signed for its size; a blob is
//! content-addressed, so it is never rewritten with other bytes); Core writes the manifest,
//! content-addressed too (`manifests/<sha256 of its JSON>.json`), whose hash is the checkpoint's
//! `snapshotId`. No file travels through Core or the command queue.
//!
//! The retention sweep deletes unreferenced objects of the bucket, so a checkpoint relies on an
//! object it finds only when that object was written recently
//! (`workspace_sweep::reusable`); an older one is refreshed first (rewritten in place) and
//! looked at again once a sweep that listed it before could no longer delete it. A checkpoint
//! that takes longer than `CHECKPOINT_WITHIN_SECONDS` fails rather than record a manifest whose
//! blobs the sweep may have judged unreferenced.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use agentplane_domain::Timestamp;
use agentplane_domain::platform::manifest::{
    self, Manifest, PlannedFile, RestorePlan, ScanEntry, UploadPlan,
};
use agentplane_domain::platform::path::refusal::{self, Refusal};
use agentplane_domain::platform::run::{CheckpointStatus, DiffStatus, Run};
use agentplane_domain::platform::workspace_sweep::{self, CHECKPOINT_WITHIN_SECONDS, REFRESH_SETTLE_SECONDS};
use agentplane_domain::sandbox::Sandbox;
use agentplane_domain::sandbox::command::{Command, CommandOutcome};
use futures_util::{StreamExt, TryStreamExt};
use sha2::{Digest, Sha256};

use super::WorkspaceError;
use crate::dispatch;
use crate::ports::PortError;
use crate::ports::blobs::{Blobs, Buckets};
use crate::ports::commands::NodeCommands;
use crate::ports::platform::PlatformStore;

/// How long a presigned URL of a checkpoint or restore lives.
const PRESIGN: Duration = Duration::from_secs(15 * 60);
/// How long the node may take for one scan, upload or restore.
const NODE_WITHIN: Duration = Duration::from_secs(600);
/// What a caller has, after a checkpoint, to record its manifest on the Run or environment.
const RECORD_WITHIN_SECONDS: i64 = 60;
/// Bucket requests at once (blob lookups, presigning).
const IN_FLIGHT: usize = 32;

/// A checkpoint taken: the manifest, its id, and what it uploaded.
#[derive(Debug, Clone)]
pub struct Taken {
    pub manifest: Manifest,
    pub id: String,
    /// Blobs uploaded (the bucket lacked them).
    pub uploaded: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Whether the manifest object was new.
    pub manifest_written: bool,
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn scratch_key(what: &str) -> String {
    format!("scratch/{}/{what}.json", crate::random::unique_hex::<12>())
}

/// Runs a long workspace command on the sandbox's node.
async fn node<S: NodeCommands>(
    store: &S,
    sandbox: &Sandbox,
    command: Command,
) -> Result<BTreeMap<String, String>, WorkspaceError> {
    match dispatch::run_within(store, &sandbox.node_id, command, NODE_WITHIN).await? {
        CommandOutcome::Done { details, .. } => Ok(details),
        CommandOutcome::Failed { message } if message.contains("does not host") => {
            Err(WorkspaceError::RuntimeUnavailable("the environment's sandbox is not reachable".into()))
        }
        CommandOutcome::Failed { message } => Err(match refusal::parse(&message) {
            Refusal::TooLarge(too_large) => WorkspaceError::TooLarge(too_large),
            _ => WorkspaceError::internal(message),
        }),
    }
}

/// What a Run records of a failed checkpoint: fixed text for each kind of failure, never the
/// node's or a provider's own words (they can carry presigned URLs, host paths or names a
/// sandbox process chose); those go to the log.
pub fn failure_message(err: &WorkspaceError) -> String {
    match err {
        WorkspaceError::TooLarge(too_large) => {
            format!("workspace_too_large: {}", too_large.describe())
        }
        WorkspaceError::RuntimeUnavailable(_) => {
            "platform_runtime_unavailable: the workspace's sandbox could not be reached".into()
        }
        WorkspaceError::Storage(_) => "service_unavailable: storage was unavailable".into(),
        _ => "internal_error: the checkpoint could not be taken".into(),
    }
}

fn relative(path: &str) -> String {
    path.strip_prefix("/workspace/").unwrap_or(path).to_owned()
}

/// Takes a checkpoint of the sandbox's workspace. The blobs of `known` (a manifest a Run or
/// environment item references, recorded by a checkpoint that relied on them: the retention
/// sweep never removes them while referenced) are not looked up again; every other blob is
/// looked up, and relied on only if recently written or refreshed (the module's note).
pub async fn take<S: PlatformStore>(
    store: &S,
    sandbox: &Sandbox,
    known: Option<&Manifest>,
) -> Result<Taken, WorkspaceError> {
    let bucket = store.workspaces()?;
    let started = Instant::now();
    let scan_key = scratch_key("scan");
    let upload_url = bucket.presign_put_any(&scan_key, PRESIGN).await?;
    node(store, sandbox, Command::WorkspaceScan { sandbox_id: sandbox.id.clone(), upload_url }).await?;
    let listing = bucket.get(&scan_key).await?;
    let _ = bucket.delete(&scan_key).await;
    let entries: Vec<ScanEntry> = serde_json::from_slice(&listing)
        .map_err(|e| WorkspaceError::internal(format!("the node's scan: {e}")))?;
    let manifest = Manifest::of_scan(entries);

    // One path (and size) per digest: what the node uploads a missing blob from.
    let mut by_digest: BTreeMap<&str, (&str, u64)> = BTreeMap::new();
    for (path, entry) in &manifest.files {
        by_digest.entry(entry.sha256.as_str()).or_insert((path.as_str(), entry.size));
    }
    let held: BTreeSet<&str> =
        known.map(|m| m.files.values().map(|e| e.sha256.as_str()).collect()).unwrap_or_default();
    let digests: Vec<String> =
        by_digest.keys().filter(|sha| !held.contains(*sha)).map(|sha| (*sha).to_owned()).collect();
    let found: Vec<(String, Found)> = futures_util::stream::iter(digests.into_iter().map(|sha| async move {
        look_up(bucket, &manifest::blob_key(&sha), "application/octet-stream").await.map(|f| (sha, f))
    }))
    .buffer_unordered(IN_FLIGHT)
    .try_collect()
    .await?;
    let mut refreshed: Vec<String> = found
        .iter()
        .filter(|(_, f)| *f == Found::Refreshed)
        .map(|(sha, _)| manifest::blob_key(sha))
        .collect();
    let mut refreshed_at = Instant::now();
    let present: BTreeSet<String> = found
        .into_iter()
        .filter(|(_, f)| *f != Found::Missing)
        .map(|(sha, _)| sha)
        .chain(held.iter().map(|sha| (*sha).to_owned()))
        .collect();
    let missing = manifest::missing_blobs(&manifest, &present);
    let (mut uploaded, mut bytes) = (0, 0);
    if !missing.is_empty() {
        let wanted: Vec<(String, String, u64)> = missing
            .iter()
            .map(|sha| {
                let (path, size) = by_digest.get(sha.as_str()).copied().unwrap_or(("", 0));
                (sha.clone(), relative(path), size)
            })
            .collect();
        let files: Vec<PlannedFile> =
            futures_util::stream::iter(wanted.into_iter().map(|(sha, path, size)| async move {
                let url = bucket
                    .presign_put(&manifest::blob_key(&sha), "application/octet-stream", size, PRESIGN)
                    .await?;
                Ok::<_, PortError>(PlannedFile { path, sha256: sha, url, mode: None })
            }))
            .buffered(IN_FLIGHT)
            .try_collect()
            .await?;
        let plan_url = put_plan(bucket, "upload", &UploadPlan { files }).await?;
        let details = node(
            store,
            sandbox,
            Command::WorkspaceUpload { sandbox_id: sandbox.id.clone(), plan_url: plan_url.0.clone() },
        )
        .await;
        let _ = bucket.delete(&plan_url.1).await;
        let details = details?;
        uploaded = details.get("uploaded").and_then(|n| n.parse().ok()).unwrap_or(0);
        bytes = details.get("bytes").and_then(|n| n.parse().ok()).unwrap_or(0);
    }
    let body = serde_json::to_vec(&manifest).map_err(|e| WorkspaceError::internal(e.to_string()))?;
    let id = hex_of(&Sha256::digest(&body));
    let key = Manifest::key(&id);
    // Past this, the settle below and the caller's record of the manifest might end after
    // `CHECKPOINT_WITHIN_SECONDS`, which the retention sweep's grace counts on.
    let write_by = CHECKPOINT_WITHIN_SECONDS - REFRESH_SETTLE_SECONDS - RECORD_WITHIN_SECONDS;
    if started.elapsed() > Duration::from_secs(write_by.unsigned_abs()) {
        return Err(WorkspaceError::internal("the checkpoint took too long to rely on the blobs it found"));
    }
    let manifest_written = match bucket.written_at(&key).await? {
        Some(written) if workspace_sweep::reusable(written, crate::now()) => false,
        Some(_) => {
            // The same bytes again: the object reads as written now.
            bucket.put(&key, body).await?;
            refreshed.push(key);
            refreshed_at = Instant::now();
            false
        }
        None => {
            bucket.put(&key, body).await?;
            true
        }
    };
    settle(bucket, &refreshed, refreshed_at).await?;
    Ok(Taken { manifest, id, uploaded, bytes, manifest_written })
}

/// What a look-up of an object a checkpoint would rely on found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// There, written recently: relied on as it is.
    Fresh,
    /// There but old: rewritten in place, to be looked at again ([`settle`]).
    Refreshed,
    /// Not there: the node uploads it.
    Missing,
}

async fn look_up(bucket: &impl Blobs, key: &str, content_type: &str) -> Result<Found, PortError> {
    match bucket.written_at(key).await? {
        Some(written) if workspace_sweep::reusable(written, crate::now()) => Ok(Found::Fresh),
        Some(_) if bucket.refresh(key, content_type).await? => Ok(Found::Refreshed),
        _ => Ok(Found::Missing),
    }
}

/// Once a sweep that listed the `refreshed` objects before their refresh (at `at`) can no
/// longer delete them, checks they are all still there: one that is not was deleted under the
/// checkpoint, which then fails (taken again, it uploads the blob).
async fn settle(bucket: &impl Blobs, refreshed: &[String], at: Instant) -> Result<(), WorkspaceError> {
    if refreshed.is_empty() {
        return Ok(());
    }
    let settle = Duration::from_secs(REFRESH_SETTLE_SECONDS.unsigned_abs());
    tokio::time::sleep(settle.saturating_sub(at.elapsed())).await;
    let keys: Vec<String> = refreshed.to_vec();
    let gone: Vec<Option<Timestamp>> =
        futures_util::stream::iter(keys.into_iter().map(|key| async move { bucket.written_at(&key).await }))
            .buffer_unordered(IN_FLIGHT)
            .try_collect()
            .await?;
    if gone.iter().any(Option::is_none) {
        return Err(WorkspaceError::internal(
            "a blob this checkpoint refreshed was deleted meanwhile; take it again",
        ));
    }
    Ok(())
}

/// Writes a plan for the node to the bucket; its presigned GET and its key.
async fn put_plan<T: serde::Serialize>(
    bucket: &impl Blobs,
    what: &str,
    plan: &T,
) -> Result<(String, String), WorkspaceError> {
    let key = scratch_key(what);
    bucket.put(&key, serde_json::to_vec(plan).map_err(|e| WorkspaceError::internal(e.to_string()))?).await?;
    Ok((bucket.presign_get(&key, PRESIGN).await?, key))
}

/// The manifest `id` from the bucket.
pub async fn load<S: Buckets>(store: &S, id: &str) -> Result<Manifest, WorkspaceError> {
    let body = store.workspaces()?.get(&Manifest::key(id)).await?;
    serde_json::from_slice(&body).map_err(|e| WorkspaceError::internal(format!("manifest {id}: {e}")))
}

/// Restores the sandbox's workspace to the manifest `id`: files not in it are removed, the
/// others fetched where their content differs.
pub async fn restore<S: PlatformStore>(
    store: &S,
    sandbox: &Sandbox,
    id: &str,
) -> Result<BTreeMap<String, String>, WorkspaceError> {
    let manifest = load(store, id).await?;
    let bucket = store.workspaces()?;
    let files: Vec<(String, String, Option<u32>)> = manifest
        .files
        .iter()
        .map(|(path, entry)| (relative(path), entry.sha256.clone(), entry.mode))
        .collect();
    let fetch: Vec<PlannedFile> =
        futures_util::stream::iter(files.into_iter().map(|(path, sha, mode)| async move {
            let url = bucket.presign_get(&manifest::blob_key(&sha), PRESIGN).await?;
            Ok::<_, PortError>(PlannedFile { path, sha256: sha, url, mode })
        }))
        .buffered(IN_FLIGHT)
        .try_collect()
        .await?;
    let plan = put_plan(bucket, "restore", &RestorePlan { fetch }).await?;
    let details = node(
        store,
        sandbox,
        Command::WorkspaceRestore { sandbox_id: sandbox.id.clone(), plan_url: plan.0.clone() },
    )
    .await;
    let _ = bucket.delete(&plan.1).await;
    details
}

/// Records the manifest the Run starts from (and the environment's initial checkpoint, the
/// first time); `None` when the Run is no longer running (a rollback took it).
pub async fn record_start<S: PlatformStore>(
    store: &S,
    run: Run,
    taken: &Taken,
) -> Result<Option<Run>, PortError> {
    store.set_initial_checkpoint(&run.project_id, &run.environment_id, &taken.id).await?;
    let id = taken.id.clone();
    let written =
        super::running::update_running(store, &run, |r| r.start_manifest = Some(id.clone()), |_| Vec::new())
            .await?;
    Ok(written.map(|(run, _)| run))
}

/// What the Run's end records of its checkpoint and diff: `after` is the checkpoint taken at
/// its end (`None`: the Run never reached its workspace, so nothing changed and nothing is
/// checkpointed).
pub fn record_end(run: &mut Run, before: Option<&Manifest>, after: Option<&Result<Taken, WorkspaceError>>) {
    match (before, after) {
        (Some(before), Some(Ok(taken))) => {
            run.checkpoint.status = CheckpointStatus::Ready;
            run.checkpoint.snapshot_id = Some(taken.id.clone());
            run.checkpoint.error = None;
            run.file_diff = manifest::diff(before, &taken.manifest);
            run.file_diff_status = DiffStatus::Ready;
            run.file_diff_error = None;
        }
        (_, Some(Err(err))) => {
            run.checkpoint.status = CheckpointStatus::Failed;
            run.checkpoint.error = Some(format!("checkpoint_failed: {}", failure_message(err)));
            run.file_diff_status = DiffStatus::Failed;
            run.file_diff_error = Some("the checkpoint after the Run failed, so its diff is unknown".into());
        }
        _ => {
            run.checkpoint.status = CheckpointStatus::Skipped;
            run.file_diff = Vec::new();
            run.file_diff_status = DiffStatus::Ready;
        }
    }
}

#[cfg(test)]
mod tests {
    use agentplane_domain::platform::path::refusal::{Cap, TooLarge};

    use super::*;

    #[test]
    fn a_failed_checkpoint_records_fixed_text_never_the_node_s_or_the_bucket_s_words() {
        let leaky = WorkspaceError::internal(
            "uploading the scan: error sending request for url (http://127.0.0.1:4566/ws/scratch/x.json?X-Amz-Signature=ab) /tmp/agentplane-node/sbx/workspace/evil",
        );
        assert_eq!(failure_message(&leaky), "internal_error: the checkpoint could not be taken");
        let unreachable = WorkspaceError::RuntimeUnavailable("node n-1 at 10.0.0.7 is gone".into());
        assert_eq!(
            failure_message(&unreachable),
            "platform_runtime_unavailable: the workspace's sandbox could not be reached"
        );
        let deep = WorkspaceError::TooLarge(TooLarge { cap: Cap::Depth, limit: 64 });
        assert_eq!(
            failure_message(&deep),
            "workspace_too_large: the workspace holds a path of more than 64 components"
        );
    }
}
