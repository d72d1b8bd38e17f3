//! `count-backfill`: environments and session files written before 0.2.0 counted toward their
//! project's quotas (README "Upgrading"). Runs hourly until its scan has reached the end once,
//! then answers `done` at once; each invocation goes on where the last one stopped. The local
//! gateway runs it at start.

use std::time::{Duration, Instant};

use agentplane_store::StoreError;
use agentplane_store::dynamo::count_backfill::{self, BackfillPage};
use agentplane_store::dynamo::job_cursor::Cursor;

use crate::App;

/// One invocation's budget: the job's timeout (300 s) less a margin to save its position.
pub const BACKFILL_BUDGET: Duration = Duration::from_secs(240);

/// What one invocation did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct BackfillReport {
    #[serde(flatten)]
    pub items: BackfillPage,
    /// Scan pages read.
    pub pages: usize,
    /// Whether the backfill is through (now or before).
    pub done: bool,
}

/// Backfills page by page until the scan ends or `budget` passes.
pub async fn count_backfill_once(app: &App, budget: Duration) -> Result<BackfillReport, StoreError> {
    let deadline = Instant::now() + budget;
    let mut report = BackfillReport::default();
    let mut after = match count_backfill::cursor(&app.store).await? {
        Cursor::Done => {
            report.done = true;
            return Ok(report);
        }
        Cursor::After(at) => Some(at),
        Cursor::Start => None,
    };
    while Instant::now() < deadline {
        let (page, next) = count_backfill::page(&app.store, after.as_ref()).await?;
        report.pages += 1;
        add(&mut report.items, page);
        match next {
            Some(next) => {
                count_backfill::save_cursor(&app.store, &Cursor::After(next.clone())).await?;
                after = Some(next);
            }
            None => {
                count_backfill::save_cursor(&app.store, &Cursor::Done).await?;
                report.done = true;
                break;
            }
        }
    }
    tracing::info!(?report, "count backfill pass");
    Ok(report)
}

fn add(total: &mut BackfillPage, page: BackfillPage) {
    total.found += page.found;
    total.environments += page.environments;
    total.files += page.files;
    total.bytes += page.bytes;
    total.marked += page.marked;
    total.skipped += page.skipped;
}
