//! The retention sweep (the `retention-sweep` job, every minute): its first duty is answering
//! actions nobody answered in time. Each due pending action is settled `expired` (a conditional
//! write: an answer that got there first wins), and each turn left with no pending action is
//! carried on (a continuation on the `runs` queue); the model then sees "expired" as the
//! action's result. It also sends again the continuation of any turn whose last answer could not
//! send it (an action left waiting in the settled index for over a minute). Then it deletes
//! what outlived its retention: session files past their expiry, background runs past
//! `AGENT_RUN_RETENTION_DAYS`, and webhook delivery records (a message with its attempts) past
//! `RECORD_RETENTION_DAYS`. Each is read oldest first from its partition of the `by_due` index,
//! in bounded pages; what a pass deletes leaves the index, so the next pass starts where this
//! one stopped. Background runs whose executor died (their lease lapsed) are settled
//! (`background_sweep`). Last, the workspaces bucket: checkpoint blobs and manifests no environment or
//! Run references any more, by a mark-and-sweep that keeps its cursor in DynamoDB
//! (workspace_sweep.rs). It also carries stored-shape migrations that must rewrite old items
//! (the store's `session_placement`), each resumable from a cursor it keeps.

use std::collections::BTreeSet;
use std::future::Future;

use agentplane_domain::Timestamp;
use agentplane_domain::action::Action;
use agentplane_domain::agent_run::AgentRun;
use agentplane_domain::file::SessionFile;
use agentplane_domain::webhook::Message;

use crate::ports::PortError;
use crate::ports::blobs::{Blobs, DELETE_BATCH};
use crate::ports::sweeps::RetentionStore;

pub use crate::ports::sweeps::ExpiringActions;
pub use crate::sweep_limits::{MAX_PAGES, PAGE};

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Due pending actions read.
    pub due: usize,
    /// Actions this pass settled `expired`.
    pub expired: usize,
    /// Actions answered (or gone) before this pass could expire them.
    pub skipped: usize,
    /// Turns this pass carried on (a continuation sent).
    pub continued: usize,
    /// Turns carried on again because their continuation had not been sent.
    pub resent: usize,
    /// Storage failures (settling or carrying on); logged, and the pass goes on.
    pub failed: usize,
    /// Expired session files deleted (their bytes, then their item and count).
    pub files_deleted: usize,
    /// Background runs deleted after their retention.
    pub runs_deleted: usize,
    /// Webhook messages deleted after their retention, each with its attempts.
    pub records_deleted: usize,
    /// Checkpoint blobs deleted: no manifest a live item references names them.
    pub blobs_deleted: usize,
    /// Checkpoint manifests deleted: no environment or Run references them.
    pub manifests_deleted: usize,
    /// Scratch objects of the workspaces bucket deleted: left over a day by a crashed checkpoint
    /// or restore.
    pub scratch_deleted: usize,
    /// Sessions rewritten from an older stored shape (`session_placement`).
    pub sessions_upgraded: usize,
    /// Turns a tenant's spend limit paused, carried on now that it has room (a new month).
    pub tenant_pauses_continued: usize,
    /// Deleted sessions whose data this pass removed (`session_purge`).
    pub sessions_purged: usize,
    /// Background runs whose executor died, settled (`background_sweep`).
    pub dead_runs_settled: usize,
}

/// How long a settled action may wait for its continuation to be sent before the sweep sends it
/// (the answer route sends at once; this is for a send that failed).
pub const RESEND_AFTER_MS: i64 = 60_000;

/// One pass at `now`: due actions, then what outlived its retention. A failed read of a page
/// is an `Err`; a failure on one item is counted and the pass goes on with the next.
pub async fn sweep_once<S: RetentionStore>(store: &S, now: Timestamp) -> Result<SweepReport, PortError> {
    let mut report = sweep(store, now).await?;
    // Without an S3 client (a function not granted the files bucket) files wait.
    if store.objects().is_ok() {
        report.files_deleted = sweep_expired(&ExpiredFiles(store), now, &mut report.failed).await?;
    }
    match crate::background_sweep::settle_dead_runs(store, now).await {
        Ok(dead) => {
            report.dead_runs_settled = dead.failed + dead.canceled;
            report.failed += dead.errors;
        }
        Err(err) => {
            tracing::warn!(error = %err, "reading the background runs whose lease lapsed failed");
            report.failed += 1;
        }
    }
    report.runs_deleted = sweep_expired(&ExpiredRuns(store), now, &mut report.failed).await?;
    report.records_deleted = sweep_expired(&ExpiredRecords(store), now, &mut report.failed).await?;
    match store.upgrade_old_sessions(MAX_PAGES).await {
        Ok(rewritten) => report.sessions_upgraded = rewritten,
        Err(err) => {
            tracing::warn!(error = %err, "rewriting old-shape sessions failed; its cursor stays");
            report.failed += 1;
        }
    }
    // Without an S3 client, deleted sessions wait for a function granted the files bucket.
    if store.objects().is_ok() {
        match crate::session_purge::purge_deleted(store, now, &mut report.failed).await {
            Ok(purged) => report.sessions_purged = purged,
            Err(err) => {
                tracing::warn!(error = %err, "reading the deleted sessions to purge failed");
                report.failed += 1;
            }
        }
    }
    match crate::tenant_resume::carry_on_tenant_pauses(store, now).await {
        Ok(resumed) => report.tenant_pauses_continued = resumed.continued,
        Err(err) => {
            tracing::warn!(error = %err, "carrying on turns paused by a tenant's limit failed");
            report.failed += 1;
        }
    }
    // Without the workspaces bucket (a function not granted it) checkpoints' objects wait.
    if let Ok(bucket) = store.workspaces() {
        let limits = crate::workspace_sweep::Limits::default();
        match crate::workspace_sweep::sweep_workspaces(store, bucket, now, limits).await {
            Ok(swept) => {
                report.blobs_deleted = swept.blobs_deleted;
                report.manifests_deleted = swept.manifests_deleted;
            }
            Err(err) => {
                tracing::warn!(error = %err, "sweeping the workspaces bucket failed; its cursor stays");
                report.failed += 1;
            }
        }
        match sweep_scratch(bucket, now).await {
            Ok(deleted) => report.scratch_deleted = deleted,
            Err(err) => {
                tracing::warn!(error = %err, "sweeping the workspaces bucket's scratch objects failed");
                report.failed += 1;
            }
        }
    }
    Ok(report)
}

/// Deletes the scratch objects of the workspaces bucket that are a day old: one page of the
/// prefix from its start (1 ListObjectsV2, 1 DeleteObjects). Scratch objects live minutes, so the
/// prefix holds only the few in use and what crashes left; what this pass deletes leaves the
/// listing, so the next pass reaches the next page of leftovers.
async fn sweep_scratch(bucket: &impl Blobs, now: Timestamp) -> Result<usize, PortError> {
    use agentplane_domain::platform::workspace_sweep::{SCRATCH_PREFIX, scratch_expired};
    let (listed, _) = bucket.list_page(SCRATCH_PREFIX, None, DELETE_BATCH).await?;
    let old: Vec<String> =
        listed.into_iter().filter(|o| scratch_expired(o.written, now)).map(|o| o.key).collect();
    if old.is_empty() {
        return Ok(0);
    }
    bucket.delete_many(&old).await
}

/// Something the sweep deletes once its retention ends.
trait Expiring: Sync {
    type Item: Sync;
    /// What it is, in logs.
    const KIND: &'static str;
    /// Up to `limit` items expired at `now`, the oldest first.
    fn expired(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Self::Item>, PortError>> + Send;
    /// Deletes one: `NotFound` (gone already) counts as deleted, `Conflict` (taken back into
    /// use meanwhile) as kept.
    fn remove(&self, item: &Self::Item) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// Deletes what `expiring` has expired at `now`, at most `MAX_PAGES` pages; the rest waits,
/// oldest first, for the next pass. Answers how many were deleted; failures add to `failed`.
async fn sweep_expired<E: Expiring>(
    expiring: &E,
    now: Timestamp,
    failed: &mut usize,
) -> Result<usize, PortError> {
    let mut total = 0;
    for _ in 0..MAX_PAGES {
        let expired = expiring.expired(now, PAGE).await?;
        let mut deleted = 0;
        for item in &expired {
            match expiring.remove(item).await {
                Ok(()) | Err(PortError::NotFound) => deleted += 1,
                Err(PortError::Conflict) => {}
                Err(err) => {
                    tracing::warn!(kind = E::KIND, error = %err, "deleting an expired item failed");
                    *failed += 1;
                }
            }
        }
        total += deleted;
        // A short page was the last; a page that deleted nothing would be read again as it is.
        if expired.len() < PAGE || deleted == 0 {
            break;
        }
    }
    Ok(total)
}

/// Session files past their expiry: the object, then the item and its count. The deployment
/// bucket's lifecycle rule and the item's TTL get there too, but late (TTL within days); a
/// bucket the project registers has neither.
struct ExpiredFiles<'a, S>(&'a S);

impl<S: RetentionStore> Expiring for ExpiredFiles<'_, S> {
    type Item = SessionFile;
    const KIND: &'static str = "session file";

    async fn expired(&self, now: Timestamp, limit: usize) -> Result<Vec<SessionFile>, PortError> {
        self.0.expired_files(now, limit).await
    }

    async fn remove(&self, file: &SessionFile) -> Result<(), PortError> {
        // The file's own bucket: a Document Store bucket's files are swept there even after the
        // project removed its registration.
        self.0.file_bucket(file.bucket.as_ref())?.delete(&file.object_key()).await?;
        self.0.delete_file(&file.project_id, &file.session_id, &file.id).await
    }
}

/// Background runs past their retention (the item's TTL is the backstop).
struct ExpiredRuns<'a, S>(&'a S);

impl<S: RetentionStore> Expiring for ExpiredRuns<'_, S> {
    type Item = AgentRun;
    const KIND: &'static str = "background run";

    async fn expired(&self, now: Timestamp, limit: usize) -> Result<Vec<AgentRun>, PortError> {
        self.0.expired_agent_runs(now, limit).await
    }

    async fn remove(&self, run: &AgentRun) -> Result<(), PortError> {
        self.0.delete_expired_agent_run(run).await
    }
}

/// Webhook messages past their retention, each with its attempts and locator; one redelivered
/// meanwhile is kept.
struct ExpiredRecords<'a, S>(&'a S);

impl<S: RetentionStore> Expiring for ExpiredRecords<'_, S> {
    type Item = Message;
    const KIND: &'static str = "webhook delivery record";

    async fn expired(&self, now: Timestamp, limit: usize) -> Result<Vec<Message>, PortError> {
        self.0.expired_webhook_records(now, limit).await
    }

    async fn remove(&self, message: &Message) -> Result<(), PortError> {
        self.0.delete_webhook_records(message).await
    }
}

/// [`sweep_once`] over any [`ExpiringActions`].
pub async fn sweep<S: ExpiringActions>(store: &S, now: Timestamp) -> Result<SweepReport, PortError> {
    let mut report = SweepReport::default();
    for _ in 0..MAX_PAGES {
        let due = store.due(now, PAGE).await?;
        report.due += due.len();
        let mut expired = Vec::new();
        for action in &due {
            match store.expire(action, now).await {
                Ok(settled) => expired.push(settled),
                // Answered, cancelled or deleted first: nothing left to expire.
                Err(PortError::Conflict | PortError::NotFound) => report.skipped += 1,
                Err(err) => {
                    tracing::warn!(action = %action.id, error = %err, "expiring an action failed");
                    report.failed += 1;
                }
            }
        }
        carry_on(store, &expired, &mut report).await;
        report.expired += expired.len();
        // A short page was the last; a page that expired nothing (already answered, or the
        // index lagging behind) would be read again as it is.
        if due.len() < PAGE || expired.is_empty() {
            break;
        }
    }
    // Settled actions whose continuation was never sent (the queue failed the settler).
    let waiting = store.waiting(now.plus_millis(-RESEND_AFTER_MS), PAGE).await?;
    let before = report.continued;
    carry_on(store, &waiting, &mut report).await;
    report.resent = report.continued - before;
    report.continued = before;
    Ok(report)
}

/// Carries on each turn of `expired` once, if none of its actions is pending any more.
async fn carry_on<S: ExpiringActions>(store: &S, expired: &[Action], report: &mut SweepReport) {
    let mut seen = BTreeSet::new();
    for action in expired {
        if !seen.insert((action.project_id, action.session_id, action.turn_id.clone())) {
            continue;
        }
        match crate::continuation::carry_on_if_settled(store, action).await {
            Ok(true) => report.continued += 1,
            Ok(false) => {}
            Err(err) => {
                // The action is expired but its turn was not carried on: logged with what is
                // needed to send the continuation by hand.
                tracing::error!(
                    project = %action.project_id, session = %action.session_id, turn = %action.turn_id,
                    version = action.pause_version, error = %err,
                    "carrying a turn on after an expiry failed"
                );
                report.failed += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Mutex;

    use agentplane_domain::action::{ActionId, ActionStatus, ActionType};
    use agentplane_domain::{ProjectId, SessionId};
    use serde_json::json;

    use super::*;
    use crate::ports::queues::{Queues, RollbacksMessage, RunsMessage, WebhooksMessage};
    use crate::ports::sessions::Continuations;

    const NOW: Timestamp = Timestamp::from_unix_seconds(1_800_000_000);

    /// Actions in memory, with ways to lose races and fail.
    #[derive(Default)]
    struct Memory {
        actions: Mutex<Vec<Action>>,
        /// Answered between the due read and the expiry.
        answered_first: HashSet<ActionId>,
        /// Their expiry fails with a storage error.
        failing: HashSet<ActionId>,
        /// The due read answers these, whatever their state (an index lagging behind).
        stale_due: Option<Vec<Action>>,
        carry_on_fails: bool,
        carried_on: Mutex<Vec<String>>,
    }

    impl ExpiringActions for Memory {
        async fn due(&self, now: Timestamp, limit: usize) -> Result<Vec<Action>, PortError> {
            if let Some(stale) = &self.stale_due {
                return Ok(stale.iter().take(limit).cloned().collect());
            }
            let actions = self.actions.lock().map_err(PortError::unavailable)?;
            let mut due: Vec<Action> = actions
                .iter()
                .filter(|a| a.status == ActionStatus::Pending && a.expires_at.is_some_and(|at| at <= now))
                .cloned()
                .collect();
            due.sort_by_key(|a| a.expires_at);
            Ok(due.into_iter().take(limit).collect())
        }

        async fn expire(&self, action: &Action, now: Timestamp) -> Result<Action, PortError> {
            if self.failing.contains(&action.id) {
                return Err(PortError::unavailable("throttled"));
            }
            let mut actions = self.actions.lock().map_err(PortError::unavailable)?;
            let stored = actions.iter_mut().find(|a| a.id == action.id).ok_or(PortError::NotFound)?;
            if self.answered_first.contains(&action.id) {
                stored.status = ActionStatus::Resolved;
            }
            if stored.status != ActionStatus::Pending {
                return Err(PortError::Conflict);
            }
            stored.status = ActionStatus::Expired;
            stored.settled_at = Some(now);
            Ok(stored.clone())
        }
    }

    impl Continuations for Memory {
        async fn pending_actions_of(
            &self,
            project: &ProjectId,
            session: &SessionId,
        ) -> Result<Vec<Action>, PortError> {
            let actions = self.actions.lock().map_err(PortError::unavailable)?;
            Ok(actions
                .iter()
                .filter(|a| {
                    a.project_id == *project && a.session_id == *session && a.status == ActionStatus::Pending
                })
                .cloned()
                .collect())
        }

        async fn mark_carried_on(&self, _action: &Action) -> Result<(), PortError> {
            Ok(())
        }
    }

    impl Queues for Memory {
        async fn send_run(&self, message: &RunsMessage, _delay_s: i32) -> Result<(), PortError> {
            if self.carry_on_fails {
                return Err(PortError::unavailable("queue down"));
            }
            if let RunsMessage::Continuation(c) = message {
                self.carried_on.lock().map_err(PortError::unavailable)?.push(c.turn_id.clone());
            }
            Ok(())
        }

        fn sends_webhooks(&self) -> bool {
            false
        }

        async fn send_webhook(&self, _message: &WebhooksMessage) -> Result<(), PortError> {
            Ok(())
        }

        async fn send_rollback(&self, _message: &RollbacksMessage) -> Result<(), PortError> {
            Ok(())
        }
    }

    fn action(n: u8, turn: &str, expires_in_s: Option<i64>) -> Action {
        Action {
            id: ActionId::from_random([n; 12]),
            project_id: ProjectId::from_random([1; 16]),
            session_id: SessionId::from_random([2; 16]),
            turn_id: turn.into(),
            pause_version: 3,
            call_id: format!("call_{n}"),
            kind: ActionType::Approval,
            status: ActionStatus::Pending,
            tool: "deploy".into(),
            args: json!({}),
            question: None,
            answer: None,
            created_at: NOW.plus_seconds(-3600),
            expires_at: expires_in_s.map(|s| NOW.plus_seconds(s)),
            settled_at: None,
            answer_key_ids: None,
        }
    }

    fn memory(actions: Vec<Action>) -> Memory {
        Memory { actions: Mutex::new(actions), ..Memory::default() }
    }

    fn status(m: &Memory, n: u8) -> ActionStatus {
        let id = ActionId::from_random([n; 12]);
        m.actions
            .lock()
            .map(|a| a.iter().find(|a| a.id == id).map(|a| a.status))
            .ok()
            .flatten()
            .unwrap_or(ActionStatus::Pending)
    }

    #[tokio::test]
    async fn only_due_actions_expire_and_a_turn_carries_on_once_when_none_is_pending() {
        let m = memory(vec![
            action(1, "turn-a", Some(-60)),
            action(2, "turn-a", Some(0)),
            action(3, "turn-b", Some(-1)),
            action(4, "turn-b", Some(60)),
            action(5, "turn-c", None),
        ]);
        let report = sweep(&m, NOW).await;
        assert_eq!(
            report.ok(),
            Some(SweepReport {
                due: 3,
                expired: 3,
                skipped: 0,
                continued: 1,
                resent: 0,
                failed: 0,
                ..SweepReport::default()
            })
        );
        assert_eq!(
            [1, 2, 3, 4, 5].map(|n| status(&m, n)),
            [
                ActionStatus::Expired,
                ActionStatus::Expired,
                ActionStatus::Expired,
                ActionStatus::Pending,
                ActionStatus::Pending
            ]
        );
        // turn-b still waits for action 4; turn-a carried on exactly once.
        assert_eq!(m.carried_on.lock().map(|c| c.clone()).ok(), Some(vec!["turn-a".to_owned()]));
        // Nothing is due any more: a second pass does nothing.
        assert_eq!(sweep(&m, NOW).await.ok(), Some(SweepReport::default()));
    }

    #[tokio::test]
    async fn an_action_answered_first_is_skipped_never_expired() {
        let mut m = memory(vec![action(1, "turn-a", Some(-5))]);
        m.answered_first.insert(ActionId::from_random([1; 12]));
        let report = sweep(&m, NOW).await.ok();
        assert_eq!(report, Some(SweepReport { due: 1, skipped: 1, ..SweepReport::default() }));
        assert_eq!(status(&m, 1), ActionStatus::Resolved);
        // The answer carries the turn on, not the sweep.
        assert_eq!(m.carried_on.lock().map(|c| c.len()).ok(), Some(0));
    }

    #[tokio::test]
    async fn a_failure_on_one_action_is_counted_and_the_pass_goes_on() {
        let mut m = memory(vec![action(1, "turn-a", Some(-5)), action(2, "turn-b", Some(-5))]);
        m.failing.insert(ActionId::from_random([1; 12]));
        let report = sweep(&m, NOW).await.ok();
        assert_eq!(
            report,
            Some(SweepReport {
                due: 2,
                expired: 1,
                continued: 1,
                resent: 0,
                failed: 1,
                skipped: 0,
                ..SweepReport::default()
            })
        );
        assert_eq!((status(&m, 1), status(&m, 2)), (ActionStatus::Pending, ActionStatus::Expired));
    }

    #[tokio::test]
    async fn a_turn_that_cannot_be_carried_on_is_counted_as_failed() {
        let mut m = memory(vec![action(1, "turn-a", Some(-5))]);
        m.carry_on_fails = true;
        let report = sweep(&m, NOW).await.ok();
        assert_eq!(report, Some(SweepReport { due: 1, expired: 1, failed: 1, ..SweepReport::default() }));
    }

    #[tokio::test]
    async fn a_pass_reads_page_after_page_up_to_its_bound() {
        let many = |count: u32| -> Vec<Action> {
            (0..count)
                .map(|i| {
                    let mut a = action(0, &format!("turn-{i}"), Some(-1));
                    let mut id = [0u8; 12];
                    id[..4].copy_from_slice(&i.to_be_bytes());
                    a.id = ActionId::from_random(id);
                    a
                })
                .collect()
        };
        let m = memory(many(250));
        let report = sweep(&m, NOW).await.ok();
        assert_eq!(
            report,
            Some(SweepReport { due: 250, expired: 250, continued: 250, ..SweepReport::default() })
        );

        // One pass stops at its bound; the next takes the rest.
        let m = memory(many(1_050));
        let bound = PAGE * MAX_PAGES;
        let report = sweep(&m, NOW).await.ok();
        assert_eq!(report.map(|r| (r.due, r.expired)), Some((bound, bound)));
        assert_eq!(sweep(&m, NOW).await.ok().map(|r| r.expired), Some(1_050 - bound));

        // An index that keeps answering what is no longer pending is read once, not forever.
        let mut lagging = memory(vec![]);
        lagging.stale_due = Some((0..PAGE as u8).map(|n| action(n, "turn-x", Some(-1))).collect());
        let report = sweep(&lagging, NOW).await.ok();
        assert_eq!(report, Some(SweepReport { due: PAGE, skipped: PAGE, ..SweepReport::default() }));
    }
}
