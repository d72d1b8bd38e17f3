//! Every job (a function run by a schedule or a queue, not by a route), named once, with its
//! least-privilege grant. The local gateway runs the same job code in-process.

mod count_backfill;
mod environment_purge;
mod rollbacks;
mod run_content;
mod runs;
mod sweep;
mod webhook_reseal;
mod webhooks;

pub use agentplane_engine::platform::outbox::{OutboxReport, sweep_outbox};
pub use count_backfill::{BACKFILL_BUDGET, BackfillReport, count_backfill_once};
pub use environment_purge::{PurgeReport, purge_environments_once};
pub use rollbacks::{
    consume_rollbacks_forever, consume_rollbacks_once, handle_rollbacks_batch, handle_rollbacks_event,
};
pub use run_content::{
    ContentReport, RUN_CONTENT_RETENTION_ENV, erase_run_content_once, run_content_retention_from_env,
};
pub use runs::{
    BatchItemFailure, LOCAL_RETRY_AFTER_S, SqsBatchResponse, SqsEvent, SqsRecord, consume_batch,
    consume_runs_forever, consume_runs_once, handle_runs_batch, handle_runs_event,
};
pub use sweep::{DEFAULT_SWEEP_INTERVAL, SweepReport, sweep_forever, sweep_interval_from_env, sweep_once};
pub use webhook_reseal::{RESEAL_BUDGET, webhook_reseal_once};
pub use webhooks::{
    DEFAULT_RETRY_INTERVAL, consume_webhooks_forever, consume_webhooks_once, handle_webhooks_batch,
    handle_webhooks_event, retry_forever, retry_interval_from_env, webhook_retry_once,
};

use crate::grants::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Job {
    /// Samples every live allocation once per sampling interval.
    Sampler,
    /// Places pending managed allocations on sandbox nodes and replaces ended compute.
    Placer,
    /// Carries paused turns on: consumes continuations from the `runs` queue.
    RunExecution,
    /// Expires actions nobody answered in time and carries their turns on.
    RetentionSweep,
    /// Consumes the `webhooks` queue: fans emitted events out and makes first attempts.
    WebhookDelivery,
    /// Makes due webhook attempts; fans out events whose queue message never came.
    WebhookRetry,
    /// Consumes the `rollbacks` queue: stops, restores and reverts the Runs of a rollback.
    RollbackRestore,
    /// Re-seals every endpoint's signing secrets under the webhook key's current version.
    WebhookReseal,
    /// Counts environments and session files written before 0.2.0 toward their quotas (once).
    CountBackfill,
}

impl Job {
    pub const ALL: &'static [Job] = &[
        Job::Sampler,
        Job::Placer,
        Job::RunExecution,
        Job::RetentionSweep,
        Job::WebhookDelivery,
        Job::WebhookRetry,
        Job::RollbackRestore,
        Job::WebhookReseal,
        Job::CountBackfill,
    ];

    pub fn function_name(self) -> &'static str {
        match self {
            Job::Sampler => "sampler",
            Job::Placer => "placer",
            Job::RunExecution => "run-execution",
            Job::RetentionSweep => "retention-sweep",
            Job::WebhookDelivery => "webhook-delivery",
            Job::WebhookRetry => "webhook-retry",
            Job::RollbackRestore => "rollback-restore",
            Job::WebhookReseal => "webhook-reseal",
            Job::CountBackfill => "count-backfill",
        }
    }

    /// The queue (its logical id) whose messages trigger the job; `None` for a scheduled one.
    pub fn queue(self) -> Option<&'static str> {
        match self {
            Job::RunExecution => Some(agentplane_store::resources::RUNS_QUEUE.logical_id),
            Job::WebhookDelivery => Some(agentplane_store::resources::WEBHOOKS_QUEUE.logical_id),
            Job::RollbackRestore => Some(agentplane_store::resources::ROLLBACKS_QUEUE.logical_id),
            Job::Sampler
            | Job::Placer
            | Job::RetentionSweep
            | Job::WebhookRetry
            | Job::WebhookReseal
            | Job::CountBackfill => None,
        }
    }

    /// How often a scheduled job runs (an EventBridge schedule expression); `None` for a queue's.
    /// Every minute: the sampler's rate is the sampling interval (`AGENTPLANE_SAMPLING_INTERVAL_S`,
    /// 60 s in a deployment), and history buckets are never narrower.
    /// The re-seal pass runs daily (operators invoke it after a key rotation), the count
    /// backfill hourly.
    pub fn schedule(self) -> Option<&'static str> {
        match self {
            Job::WebhookReseal => return Some("rate(1 day)"),
            // Until its one pass is through (after an upgrade), then a read of its cursor.
            Job::CountBackfill => return Some("rate(1 hour)"),
            _ => {}
        }
        self.queue().is_none().then_some("rate(1 minute)")
    }

    /// How many messages one invocation of a queue's job takes; `None` for a scheduled one. A
    /// failed message is a partial batch failure: it alone is retried, then dead-lettered.
    pub const fn batch_size(self) -> Option<u32> {
        match self {
            // Each continuation runs a turn to its next end or pause.
            Job::RunExecution => Some(5),
            // A batch's attempts run at once, each within the 10 s delivery timeout.
            Job::WebhookDelivery => Some(10),
            // One rollback at a time: it stops, restores and reverts many Runs.
            Job::RollbackRestore => Some(1),
            Job::Sampler
            | Job::Placer
            | Job::RetentionSweep
            | Job::WebhookRetry
            | Job::WebhookReseal
            | Job::CountBackfill => None,
        }
    }

    /// The job's Lambda timeout in seconds (infra/template.yaml, written by
    /// `cargo xtask template`). A queue's job stays below its queue's visibility timeout
    /// (shared/store/src/resources.rs), so a message is not redelivered while it still runs.
    pub const fn timeout_s(self) -> u32 {
        match self {
            // Within the minute of their schedule (an overlapping run still writes nothing twice:
            // samples are keyed by interval, placements and expiries are conditional).
            Job::Sampler | Job::Placer | Job::RetentionSweep => 50,
            Job::WebhookRetry => 55,
            // Below the webhooks queue's 120 s.
            Job::WebhookDelivery => 60,
            // Lambda's ceiling, below the runs and rollbacks queues' 960 s; run-execution fits one
            // invocation's budget under it (AGENTPLANE_FUNCTION_TIMEOUT_S).
            Job::RunExecution | Job::RollbackRestore => 900,
            // Its budget (`RESEAL_BUDGET`, 240 s) and a margin; the next invocation goes on.
            Job::WebhookReseal => 300,
            // Its budget (`BACKFILL_BUDGET`, 240 s) and a margin.
            Job::CountBackfill => 300,
        }
    }

    /// The job's memory in MB; `None`: the template's default (`Globals`, 256 MB).
    pub const fn memory_mb(self) -> Option<u32> {
        match self {
            // Runs turns, as the turn routes do.
            Job::RunExecution => Some(512),
            Job::Sampler
            | Job::Placer
            | Job::RetentionSweep
            | Job::WebhookDelivery
            | Job::WebhookRetry
            | Job::RollbackRestore
            | Job::WebhookReseal
            | Job::CountBackfill => None,
        }
    }

    /// What a job's function may touch.
    pub const fn grants(self) -> &'static [Grant] {
        match self {
            // Reads allocations and sessions, and sandbox counters; writes samples.
            Job::Sampler => &[MAIN_R, TELEMETRY_W],
            // Reads allocations and nodes; writes sandboxes, node commands and allocations.
            Job::Placer => &[MAIN_W],
            // Claims and runs paused turns (sessions, actions, events, large transcripts, the
            // model); consumes continuations and sends the next one when a turn pauses again.
            // Platform Runs too: their workspace (node commands) and checkpoints.
            Job::RunExecution => &[
                MAIN_W,
                EVENTS_W,
                FILES_W,
                DOCS_R,
                WORKSPACES_W,
                MODEL_KEY,
                RUNS_CONSUME,
                RUNS_SEND,
                WEBHOOKS_SEND,
            ],
            // Fans emitted events out into messages and makes first attempts (endpoints, messages,
            // attempts; opens the signing secrets); sends the first attempts it fans out.
            Job::WebhookDelivery => &[MAIN_W, WEBHOOK_KEY, WEBHOOKS_CONSUME, WEBHOOKS_SEND],
            // Makes due attempts and fans out events whose queue message never came.
            Job::WebhookRetry => &[MAIN_W, WEBHOOK_KEY, WEBHOOKS_SEND],
            // Stops the affected Runs, restores files (checkpoints: the workspaces bucket), the
            // affected sessions' transcripts (large ones in the files bucket), marks Runs reverted
            // with their `run.reverted` events.
            // RUNS_SEND: a rollback's end sends the first Run that waited for it.
            Job::RollbackRestore => {
                &[MAIN_W, FILES_W, WORKSPACES_W, ROLLBACKS_CONSUME, WEBHOOKS_SEND, RUNS_SEND]
            }
            // Expires due actions and carries their turns on.
            // Also deletes expired session files' bytes (the files bucket and Document Store
            // buckets), and checkpoint blobs and manifests no Run or environment references (the
            // workspaces bucket).
            // Re-sends the Platform outbox (Runs, rollbacks) and gives up overdue rollbacks (their
            // events go to the webhooks queue).
            // Reads every endpoint, opens and seals its secrets, writes them back.
            Job::WebhookReseal => &[MAIN_W, WEBHOOK_KEY],
            // Scans the main table; marks environments and files counted, with their counts.
            Job::CountBackfill => &[MAIN_W],
            Job::RetentionSweep => {
                &[MAIN_W, EVENTS_W, FILES_W, DOCS_W, WORKSPACES_W, RUNS_SEND, ROLLBACKS_SEND, WEBHOOKS_SEND]
            }
        }
    }

    /// The stack resources this job's function may touch; how is in [`Job::grants`].
    pub fn resources(self) -> Vec<&'static str> {
        crate::grants::resources(self.grants())
    }

    pub fn by_function_name(name: &str) -> Option<Job> {
        Self::ALL.iter().copied().find(|j| j.function_name() == name)
    }
}
