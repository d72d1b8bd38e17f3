//! Every job (a function run by a schedule or a queue, not by a route), named once, with its
//! least-privilege grant. The local gateway runs the same job code in-process.

mod environment_purge;
mod rollbacks;
mod run_content;
mod runs;
mod sweep;
mod webhooks;

pub use agentplane_engine::platform::outbox::{OutboxReport, sweep_outbox};
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
pub use webhooks::{
    DEFAULT_RETRY_INTERVAL, consume_webhooks_forever, consume_webhooks_once, handle_webhooks_batch,
    handle_webhooks_event, retry_forever, retry_interval_from_env, webhook_retry_once,
};

use agentplane_engine::runtime::{RuntimeTelemetry, sample_once};
use agentplane_store::{ResourceNames, Store, StoreError};
use lambda_http::lambda_runtime::{self, LambdaEvent, service_fn};

use serde_json::{Value, json};

use crate::edge;

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
        }
    }

    /// The queue (its logical id) whose messages trigger the job; `None` for a scheduled one.
    pub fn queue(self) -> Option<&'static str> {
        match self {
            Job::RunExecution => Some(agentplane_store::resources::RUNS_QUEUE.logical_id),
            Job::WebhookDelivery => Some(agentplane_store::resources::WEBHOOKS_QUEUE.logical_id),
            Job::RollbackRestore => Some(agentplane_store::resources::ROLLBACKS_QUEUE.logical_id),
            Job::Sampler | Job::Placer | Job::RetentionSweep | Job::WebhookRetry => None,
        }
    }

    /// The stack resources this job's function may touch; how is in [`crate::grants`].
    pub fn resources(self) -> Vec<&'static str> {
        crate::grants::resources(crate::grants::job(self))
    }

    pub fn by_function_name(name: &str) -> Option<Job> {
        Self::ALL.iter().copied().find(|j| j.function_name() == name)
    }
}

/// Runs one job as a Lambda function: a scheduled one ignores its event (a tick); a queue's
/// answers each batch with its partial failures.
pub async fn serve(job: Job) -> Result<(), lambda_runtime::Error> {
    crate::lambda::init_tracing();
    let sdk = agentplane_store::aws::sdk_config_from_env().await;
    let store = Store::new(&sdk, ResourceNames::from_env());
    match job {
        Job::Sampler => {
            let runtime = RuntimeTelemetry::from_env(&store);
            Box::pin(every_tick(|| async {
                let report = sample_once(&store, &runtime, edge::now()).await?;
                tracing::info!(?report, "sampler pass");
                Ok(json!({
                    "allocations": report.allocations,
                    "written": report.written,
                    "duplicates": report.duplicates,
                    "failed": report.failed,
                }))
            }))
            .await
        }
        Job::Placer => {
            let app = crate::App::new(store, None);
            Box::pin(every_tick(|| async {
                let report = crate::sandbox::managed::reconcile(&app, edge::now()).await?;
                tracing::info!(?report, "placer pass");
                Ok(json!({
                    "allocations": report.allocations,
                    "placed": report.placed,
                    "replaced": report.replaced,
                    "failed": report.failed,
                }))
            }))
            .await
        }
        Job::RunExecution => {
            let app = crate::App::from_env(crate::grants::job(job)).await?;
            let app = &app;
            lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| async move {
                Ok::<_, lambda_runtime::Error>(handle_runs_event(app, event.payload).await)
            }))
            .await
        }
        Job::WebhookDelivery => {
            let app = crate::App::from_env(crate::grants::job(job)).await?;
            let app = &app;
            lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| async move {
                Ok::<_, lambda_runtime::Error>(handle_webhooks_event(app, event.payload).await)
            }))
            .await
        }
        Job::RollbackRestore => {
            let app = crate::App::from_env(crate::grants::job(job)).await?;
            let app = &app;
            lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| async move {
                Ok::<_, lambda_runtime::Error>(handle_rollbacks_event(app, event.payload).await)
            }))
            .await
        }
        Job::WebhookRetry => {
            let app = crate::App::from_env(crate::grants::job(job)).await?;
            Box::pin(every_tick(|| async {
                let report = webhook_retry_once(&app).await?;
                tracing::info!(?report, "webhook retry pass");
                Ok(json!({
                    "events": report.events,
                    "due": report.due,
                    "attempted": report.attempted,
                    "skipped": report.skipped,
                    "failed": report.failed,
                }))
            }))
            .await
        }
        Job::RetentionSweep => {
            let app = crate::App::from_env(crate::grants::job(job)).await?;
            Box::pin(every_tick(|| async {
                let now = edge::now();
                let report = sweep_once(&app.store, now).await?;
                tracing::info!(?report, "retention sweep pass");
                let purged = purge_environments_once(&app, now).await?;
                tracing::info!(?purged, "environment purge pass");
                let content = erase_run_content_once(&app, run_content_retention_from_env(), now).await?;
                tracing::info!(?content, "run content retention pass");
                let outbox = sweep_outbox(&app.store, now, app.platform_limits.rollback_give_up).await?;
                tracing::info!(?outbox, "platform outbox pass");
                Ok(json!({
                    "due": report.due,
                    "expired": report.expired,
                    "skipped": report.skipped,
                    "continued": report.continued,
                    "files_deleted": report.files_deleted,
                    "runs_deleted": report.runs_deleted,
                    "records_deleted": report.records_deleted,
                    "blobs_deleted": report.blobs_deleted,
                    "scratch_deleted": report.scratch_deleted,
                    "manifests_deleted": report.manifests_deleted,
                    "sessions_upgraded": report.sessions_upgraded,
                    "environments_purged": purged.environments,
                    "run_contents_erased": content.erased,
                    "sessions_purged": report.sessions_purged,
                    "tenant_pauses_continued": report.tenant_pauses_continued,
                    "dead_runs_settled": report.dead_runs_settled,
                    "outbox_runs_sent": outbox.runs_sent,
                    "outbox_rollbacks_sent": outbox.rollbacks_sent,
                    "rollbacks_given_up": outbox.rollbacks_given_up,
                    "failed": report.failed + purged.failed + content.failed + outbox.failed,
                }))
            }))
            .await
        }
    }
}

/// Runs `pass` once per invocation and answers with its summary.
async fn every_tick<F, Fut>(pass: F) -> Result<(), lambda_runtime::Error>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Value, StoreError>>,
{
    lambda_runtime::run(service_fn(|_: LambdaEvent<Value>| {
        let run = pass();
        async move { run.await.map_err(lambda_runtime::Error::from) }
    }))
    .await
}
