//! Each job as a Lambda function: a scheduled one runs one pass per invocation and answers with
//! its report; a queue's answers each batch with its partial failures. A job's binary calls one
//! of these, so it links that job alone.

use agentplane_api::App;
use agentplane_api::jobs::{self, Job, SqsBatchResponse, SqsEvent};
use agentplane_engine::runtime::{RuntimeTelemetry, sample_once};
use agentplane_store::{ResourceNames, Store, StoreError};
use lambda_http::lambda_runtime::{self, LambdaEvent, service_fn};
use serde::Serialize;
use serde_json::Value;

use crate::metrics;

/// The job functions' entry points, each compiled once here (not in its binary, which only
/// links it).
macro_rules! entry_points {
    ($($job:ident => $serve:ident),* $(,)?) => {
        $(
            #[doc = concat!("Runs `", stringify!($job), "` until Lambda stops the process.")]
            pub fn $job() -> std::process::ExitCode {
                crate::run($serve())
            }
        )*
    };
}

entry_points! {
    sampler => serve_sampler,
    placer => serve_placer,
    run_execution => serve_run_execution,
    webhook_delivery => serve_webhook_delivery,
    rollback_restore => serve_rollback_restore,
    webhook_retry => serve_webhook_retry,
    retention_sweep => serve_retention_sweep,
    webhook_reseal => serve_webhook_reseal,
    count_backfill => serve_count_backfill,
}

/// What a `sampler` pass did.
#[derive(Debug, Serialize)]
struct SamplerPass {
    allocations: usize,
    written: usize,
    duplicates: usize,
    failed: usize,
}

/// What a `placer` pass did.
#[derive(Debug, Serialize)]
struct PlacerPass {
    allocations: usize,
    placed: usize,
    replaced: usize,
    failed: usize,
}

/// What a `webhook-retry` pass did.
#[derive(Debug, Serialize)]
struct RetryPass {
    events: usize,
    due: usize,
    attempted: usize,
    skipped: usize,
    failed: usize,
}

/// What a `retention-sweep` pass did: the sweep's own counts, then the environment purge, Run
/// content retention and the Platform outbox.
#[derive(Debug, Default, Serialize)]
pub(crate) struct RetentionPass {
    pub(crate) due: usize,
    pub(crate) expired: usize,
    pub(crate) skipped: usize,
    pub(crate) continued: usize,
    pub(crate) files_deleted: usize,
    pub(crate) runs_deleted: usize,
    pub(crate) records_deleted: usize,
    pub(crate) blobs_deleted: usize,
    pub(crate) scratch_deleted: usize,
    pub(crate) manifests_deleted: usize,
    pub(crate) sessions_upgraded: usize,
    pub(crate) environments_purged: usize,
    pub(crate) run_contents_erased: usize,
    pub(crate) sessions_purged: usize,
    pub(crate) tenant_pauses_continued: usize,
    pub(crate) dead_runs_settled: usize,
    pub(crate) outbox_runs_sent: usize,
    pub(crate) outbox_rollbacks_sent: usize,
    pub(crate) rollbacks_given_up: usize,
    pub(crate) failed: usize,
}

/// `sampler`: samples every live allocation once per sampling interval.
async fn serve_sampler() -> Result<(), lambda_runtime::Error> {
    crate::init_tracing();
    let sdk = agentplane_store::aws::sdk_config_from_env().await;
    let store = Store::new(&sdk, ResourceNames::from_env());
    let runtime = RuntimeTelemetry::from_env(&store);
    Box::pin(every_tick(|| async {
        let report = sample_once(&store, &runtime, agentplane_engine::now()).await?;
        tracing::info!(?report, "sampler pass");
        Ok(SamplerPass {
            allocations: report.allocations,
            written: report.written,
            duplicates: report.duplicates,
            failed: report.failed,
        })
    }))
    .await
}

/// `placer`: places pending managed allocations on sandbox nodes and replaces ended compute.
async fn serve_placer() -> Result<(), lambda_runtime::Error> {
    crate::init_tracing();
    let sdk = agentplane_store::aws::sdk_config_from_env().await;
    let app = App::new(Store::new(&sdk, ResourceNames::from_env()), None);
    Box::pin(every_tick(|| async {
        let report = agentplane_api::sandbox::managed::reconcile(&app, agentplane_engine::now()).await?;
        tracing::info!(?report, "placer pass");
        Ok(PlacerPass {
            allocations: report.allocations,
            placed: report.placed,
            replaced: report.replaced,
            failed: report.failed,
        })
    }))
    .await
}

/// `run-execution`: the `runs` queue (continuations, background runs, Platform Runs).
async fn serve_run_execution() -> Result<(), lambda_runtime::Error> {
    crate::init_tracing();
    let app = App::from_env(Job::RunExecution.grants()).await?;
    on_queue(&app, jobs::handle_runs_event).await
}

/// `webhook-delivery`: the `webhooks` queue (fan-out and first attempts).
async fn serve_webhook_delivery() -> Result<(), lambda_runtime::Error> {
    crate::init_tracing();
    let app = App::from_env(Job::WebhookDelivery.grants()).await?;
    on_queue(&app, jobs::handle_webhooks_event).await
}

/// `rollback-restore`: the `rollbacks` queue.
async fn serve_rollback_restore() -> Result<(), lambda_runtime::Error> {
    crate::init_tracing();
    let app = App::from_env(Job::RollbackRestore.grants()).await?;
    on_queue(&app, jobs::handle_rollbacks_event).await
}

/// `webhook-retry`: makes due webhook attempts; fans out events whose queue message never came.
async fn serve_webhook_retry() -> Result<(), lambda_runtime::Error> {
    crate::init_tracing();
    let app = App::from_env(Job::WebhookRetry.grants()).await?;
    Box::pin(every_tick(|| async {
        let report = jobs::webhook_retry_once(&app).await?;
        tracing::info!(?report, "webhook retry pass");
        Ok(RetryPass {
            events: report.events,
            due: report.due,
            attempted: report.attempted,
            skipped: report.skipped,
            failed: report.failed,
        })
    }))
    .await
}

/// `retention-sweep`: expiries, retention, purges and the Platform outbox, one pass each tick.
async fn serve_retention_sweep() -> Result<(), lambda_runtime::Error> {
    crate::init_tracing();
    let app = App::from_env(Job::RetentionSweep.grants()).await?;
    Box::pin(every_tick(|| async {
        let now = agentplane_engine::now();
        let report = jobs::sweep_once(&app.store, now).await?;
        tracing::info!(?report, "retention sweep pass");
        let purged = jobs::purge_environments_once(&app, now).await?;
        tracing::info!(?purged, "environment purge pass");
        let content = jobs::erase_run_content_once(&app, jobs::run_content_retention_from_env(), now).await?;
        tracing::info!(?content, "run content retention pass");
        let outbox = jobs::sweep_outbox(&app.store, now, app.platform_limits.rollback_give_up).await?;
        tracing::info!(?outbox, "platform outbox pass");
        let pass = RetentionPass {
            due: report.due,
            expired: report.expired,
            skipped: report.skipped,
            continued: report.continued,
            files_deleted: report.files_deleted,
            runs_deleted: report.runs_deleted,
            records_deleted: report.records_deleted,
            blobs_deleted: report.blobs_deleted,
            scratch_deleted: report.scratch_deleted,
            manifests_deleted: report.manifests_deleted,
            sessions_upgraded: report.sessions_upgraded,
            environments_purged: purged.environments,
            run_contents_erased: content.erased,
            sessions_purged: report.sessions_purged,
            tenant_pauses_continued: report.tenant_pauses_continued,
            dead_runs_settled: report.dead_runs_settled,
            outbox_runs_sent: outbox.runs_sent,
            outbox_rollbacks_sent: outbox.rollbacks_sent,
            rollbacks_given_up: outbox.rollbacks_given_up,
            failed: report.failed + purged.failed + content.failed + outbox.failed,
        };
        // Every pass, zeros too: the stuck-work alarm always has data.
        metrics::emit(&stuck_work_metrics(&pass));
        Ok(pass)
    }))
    .await
}

/// What a retention pass found stuck, as the metrics the stuck-work alarm watches: background
/// runs past their lease, Platform Runs owed a message, and rollbacks given up.
pub(crate) fn stuck_work_metrics(pass: &RetentionPass) -> [(&'static str, u64); 3] {
    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    [
        (metrics::BACKGROUND_RUNS_PAST_LEASE, count(pass.dead_runs_settled)),
        (metrics::PLATFORM_RUNS_RESENT, count(pass.outbox_runs_sent)),
        (metrics::ROLLBACKS_GIVEN_UP, count(pass.rollbacks_given_up)),
    ]
}

/// `webhook-reseal`: endpoints' secrets under the webhook key's current version, going on
/// where the last invocation stopped.
async fn serve_webhook_reseal() -> Result<(), lambda_runtime::Error> {
    crate::init_tracing();
    let app = App::from_env(Job::WebhookReseal.grants()).await?;
    Box::pin(every_tick(|| async {
        jobs::webhook_reseal_once(&app, jobs::RESEAL_BUDGET).await.map_err(StoreError::from)
    }))
    .await
}

/// `count-backfill`: pre-0.2.0 environments and files counted toward their quotas, going on
/// where the last invocation stopped (at once `done` once through).
async fn serve_count_backfill() -> Result<(), lambda_runtime::Error> {
    crate::init_tracing();
    let app = App::from_env(Job::CountBackfill.grants()).await?;
    Box::pin(every_tick(|| async { jobs::count_backfill_once(&app, jobs::BACKFILL_BUDGET).await })).await
}

/// Answers each batch of a queue's messages with `handle`'s partial failures.
async fn on_queue<'a, F, Fut>(app: &'a App, handle: F) -> Result<(), lambda_runtime::Error>
where
    F: Fn(&'a App, SqsEvent) -> Fut,
    Fut: Future<Output = SqsBatchResponse>,
{
    let handle = &handle;
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| async move {
        Ok::<_, lambda_runtime::Error>(handle(app, event.payload).await)
    }))
    .await
}

/// Runs `pass` once per invocation and answers with its report.
async fn every_tick<F, Fut, R>(pass: F) -> Result<(), lambda_runtime::Error>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<R, StoreError>>,
    R: Serialize,
{
    lambda_runtime::run(service_fn(|_: LambdaEvent<Value>| {
        let run = pass();
        async move {
            let report = run.await.map_err(lambda_runtime::Error::from)?;
            serde_json::to_value(report).map_err(lambda_runtime::Error::from)
        }
    }))
    .await
}
