//! The content retention of Platform Runs, one step of the retention sweep: once a Run ended
//! longer ago than the deployment's retention (`RUN_CONTENT_RETENTION_DAYS`; off by default),
//! its `input` and `output`, the content of its turn's events and the session transcript it
//! saved before it ran (for a rollback) are erased, and `contentDeletedAt` set
//! (`agentplane_domain::platform::content_retention` says what goes and what stays). The Run
//! is rewritten conditionally on its version, so a concurrent change (a stop, a rollback) is
//! read again rather than overwritten. Due Runs come oldest first from the due-work index
//! (`run_content.rs` in the store), in bounded pages.

use agentplane_domain::Timestamp;
use agentplane_domain::platform::content_retention::{self, Due};

use crate::environment_purge::run_transcript_key;
use crate::ports::PortError;
use crate::ports::blobs::Blobs;
use crate::ports::sweeps::{ContentDue, RunContentStore};

/// Due Runs one read takes.
pub const PAGE: usize = 100;
/// Reads one pass makes at most; what is left waits for the next pass.
pub const MAX_PAGES: usize = 10;
/// Lost races on one Run before the pass leaves it for the next.
const ATTEMPTS: usize = 4;

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContentReport {
    /// Runs whose content this pass erased.
    pub erased: usize,
    /// Events of their turns rewritten without content.
    pub events_erased: usize,
    /// Runs looked at too early (not ended, or ended too recently): moved on in the index.
    pub postponed: usize,
    /// Failures (logged; the Run stays due).
    pub failed: usize,
}

/// One pass at `now` under a retention of `retention_s` seconds (`None`: off, nothing is done).
pub async fn erase_expired_content<S: RunContentStore>(
    store: &S,
    retention_s: Option<i64>,
    now: Timestamp,
) -> Result<ContentReport, PortError> {
    let mut report = ContentReport::default();
    let Some(retention_s) = retention_s else { return Ok(report) };
    for _ in 0..MAX_PAGES {
        let due = store.content_due(now.plus_seconds(-retention_s), PAGE).await?;
        let mut moved = 0;
        for item in &due {
            match erase_one(store, item, retention_s, now, &mut report).await {
                Ok(()) => moved += 1,
                Err(err) => {
                    tracing::warn!(error = %err, run = %item.run_id, "erasing a Run's content failed");
                    report.failed += 1;
                }
            }
        }
        if due.len() < PAGE || moved == 0 {
            break;
        }
    }
    Ok(report)
}

async fn erase_one<S: RunContentStore>(
    store: &S,
    item: &ContentDue,
    retention_s: i64,
    now: Timestamp,
    report: &mut ContentReport,
) -> Result<(), PortError> {
    for _ in 0..ATTEMPTS {
        let mut run = match store.run(&item.project_id, &item.run_id).await {
            Ok(run) => run,
            Err(PortError::NotFound) => return store.content_done(item).await,
            Err(err) => return Err(err),
        };
        match content_retention::due(&run, retention_s, now) {
            Due::Done => return store.content_done(item).await,
            Due::Later { at } => {
                report.postponed += 1;
                return store.postpone_content(item, at).await;
            }
            Due::Erase => {}
        }
        // The content outside the Run item first: a failure leaves the Run due, to be done again.
        report.events_erased += store
            .erase_turn_events(&run.session_id, &run.turn_id(), content_retention::erased_event_data)
            .await?;
        if let Ok(bucket) = store.workspaces() {
            bucket.delete(&run_transcript_key(&run.id)).await?;
        }
        let expected = run.version;
        content_retention::erase(&mut run, now);
        run.version = expected + 1;
        match store.replace_run(&run, expected).await {
            Ok(()) => {
                report.erased += 1;
                return store.content_done(item).await;
            }
            Err(PortError::Conflict) => continue,
            Err(err) => return Err(err),
        }
    }
    Err(PortError::Conflict)
}
