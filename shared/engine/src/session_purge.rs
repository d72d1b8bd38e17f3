//! Purging deleted sessions: a DELETE hides a session at once (it leaves lists and reads) and
//! queues it; this removes what it held: its transcript (item and S3 bodies), its files (items,
//! count and bytes, in whichever bucket they live), its actions, its feedback, its event log,
//! and the title and metadata on its item. The session item stays as a tombstone (deleted and
//! purged), which telemetry and retention still read.
//!
//! Every step deletes what is there, so a purge that failed midway is simply run again by the
//! next sweep (the session leaves the queue only at the end), and a second purge of a purged
//! session finds nothing and changes nothing.

use agentplane_domain::{ProjectId, SessionId, Timestamp};

use crate::ports::PortError;
use crate::ports::sweeps::SessionPurgeStore;

/// Deleted sessions one sweep pass purges at most (the rest wait for the next pass).
pub const PURGES_PER_PASS: usize = 25;

/// What one purge removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Main-table items (transcript, files, file count, actions, feedback).
    pub items: usize,
    /// Events of its log.
    pub events: usize,
    /// Objects (transcript bodies, file bytes).
    pub objects: usize,
    /// The session item was stripped and left the purge queue by this purge.
    pub finished: bool,
}

/// Removes what the deleted session `session` of `project` held. Idempotent.
pub async fn purge<S: SessionPurgeStore>(
    store: &S,
    project: &ProjectId,
    session: &SessionId,
) -> Result<Purged, PortError> {
    purge_at(store, project, session, crate::now()).await
}

async fn purge_at<S: SessionPurgeStore>(
    store: &S,
    project: &ProjectId,
    session: &SessionId,
    now: Timestamp,
) -> Result<Purged, PortError> {
    let mut purged = Purged::default();
    // Bytes first: once an item is gone, nothing would name an object in another bucket.
    let items = store.owned_items(project, session).await?;
    for file in items.iter().filter_map(|i| i.file.as_ref()) {
        if file.bucket.is_some() {
            store.delete_file_object(file).await?;
            purged.objects += 1;
        }
    }
    purged.objects += store.delete_session_objects(project, session).await?;
    purged.events = store.delete_session_events(session).await?;
    store.delete_owned_items(&items).await?;
    purged.items = items.len();
    purged.finished = store.finish_purge(project, session, now).await?;
    Ok(purged)
}

/// The sweep's step: purges up to [`PURGES_PER_PASS`] deleted sessions; how many it finished.
/// A session whose purge failed stays queued for the next pass (counted in `failed`).
pub async fn purge_deleted<S: SessionPurgeStore>(
    store: &S,
    now: Timestamp,
    failed: &mut usize,
) -> Result<usize, PortError> {
    let mut finished = 0;
    for due in store.sessions_to_purge(now, PURGES_PER_PASS).await? {
        match purge_at(store, &due.project, &due.session, now).await {
            Ok(purged) => finished += usize::from(purged.finished),
            Err(err) => {
                tracing::warn!(session = %due.session, error = %err, "purging a deleted session failed; it stays queued");
                *failed += 1;
            }
        }
    }
    Ok(finished)
}
