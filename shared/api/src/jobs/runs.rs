//! The `run-execution` job: consumes the `runs` queue and carries paused turns on. In Lambda an
//! SQS event source hands it batches; in the local gateway and the tests
//! [`consume_runs_forever`] long-polls the same queue and runs the same batch handler.
//!
//! What becomes of a message:
//! - a continuation that ran, or was stale (claimed already, cancelled, gone): done (deleted);
//! - a continuation whose run hit a storage failure: a partial batch failure, so SQS delivers
//!   it again (and after `max_receive_count` deliveries moves it to the dead-letter queue);
//! - a body that is not a message at all (not JSON, no `kind`, a continuation with bad fields):
//!   logged as an error and done with, since no redelivery can ever fix it;
//! - a message of a `kind` this build does not know (sent by a newer one): a failure, so that it
//!   is retried and, at worst, kept in the dead-letter queue for a redrive rather than lost.
//!
//! The SQS event and batch response are typed here (four fields) rather than taken from
//! `aws_lambda_events`, whose `sqs` feature would pull in `serde_with` for nothing we read.

use std::future::Future;
use std::time::Duration;

use crate::app::Engine;
use agentplane_domain::action::Continuation;
use agentplane_domain::agent_run::StartRun;
use agentplane_domain::platform::run::ExecuteRun;
use agentplane_engine::background::{BackgroundConfig, Executed};
use agentplane_engine::continuation::Continued;
use agentplane_store::{ReceivedMessage, RunsMessage, RunsQueue, StoreError};
use serde::{Deserialize, Serialize};

use crate::App;

/// The event an SQS event source invokes the function with (the fields we read).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SqsEvent {
    #[serde(rename = "Records", default)]
    pub records: Vec<SqsRecord>,
}

/// One message of an [`SqsEvent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SqsRecord {
    #[serde(default)]
    pub message_id: String,
    #[serde(default)]
    pub receipt_handle: String,
    #[serde(default)]
    pub body: String,
}

/// The partial batch response (`ReportBatchItemFailures`): the messages to deliver again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SqsBatchResponse {
    pub batch_item_failures: Vec<BatchItemFailure>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchItemFailure {
    pub item_identifier: String,
}

impl SqsBatchResponse {
    /// Whether the message `id` is to be delivered again.
    pub fn failed(&self, id: &str) -> bool {
        self.batch_item_failures.iter().any(|f| f.item_identifier == id)
    }
}

impl From<SqsRecord> for ReceivedMessage {
    fn from(r: SqsRecord) -> Self {
        Self { id: r.message_id, receipt_handle: r.receipt_handle, body: r.body }
    }
}

/// What a body holds.
enum Parsed {
    Continuation(Continuation),
    StartRun(StartRun),
    PlatformRun(ExecuteRun),
    UnknownKind(String),
    Malformed(String),
}

fn parse(body: &str) -> Parsed {
    match serde_json::from_str::<RunsMessage>(body) {
        Ok(RunsMessage::Continuation(c)) => Parsed::Continuation(c),
        Ok(RunsMessage::StartRun(s)) => Parsed::StartRun(s),
        Ok(RunsMessage::PlatformRun(p)) => Parsed::PlatformRun(p),
        Err(err) => {
            let kind = serde_json::from_str::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned));
            match kind {
                Some(kind) if !matches!(kind.as_str(), "continuation" | "start_run" | "platform_run") => {
                    Parsed::UnknownKind(kind)
                }
                _ => Parsed::Malformed(err.to_string()),
            }
        }
    }
}

/// Handles one batch: each continuation is run by `run` (concurrently: each is claimed once, so
/// any order is safe), and the response names the messages to deliver again. `run` is the seam
/// a test replaces; the job passes [`Engine::continue_turn`].
pub async fn handle_runs_batch<F, Fut>(records: &[ReceivedMessage], run: F) -> SqsBatchResponse
where
    F: Fn(Continuation) -> Fut,
    Fut: Future<Output = Result<Continued, StoreError>>,
{
    handle_runs_batch_with(records, run, |_| async { Err(StoreError::unavailable("no background runner")) })
        .await
}

/// [`handle_runs_batch`] with the seam that starts background runs (`start`).
pub async fn handle_runs_batch_with<F, Fut, G, Gut>(
    records: &[ReceivedMessage],
    run: F,
    start: G,
) -> SqsBatchResponse
where
    F: Fn(Continuation) -> Fut,
    Fut: Future<Output = Result<Continued, StoreError>>,
    G: Fn(StartRun) -> Gut,
    Gut: Future<Output = Result<Executed, StoreError>>,
{
    let platform = |_| async { Err(StoreError::unavailable("no platform Run executor")) };
    handle_runs_batch_all(records, run, start, platform).await
}

/// [`handle_runs_batch_with`] with the seam that executes platform Runs (`platform`).
pub async fn handle_runs_batch_all<F, Fut, G, Gut, H, Hut>(
    records: &[ReceivedMessage],
    run: F,
    start: G,
    platform: H,
) -> SqsBatchResponse
where
    F: Fn(Continuation) -> Fut,
    Fut: Future<Output = Result<Continued, StoreError>>,
    G: Fn(StartRun) -> Gut,
    Gut: Future<Output = Result<Executed, StoreError>>,
    H: Fn(ExecuteRun) -> Hut,
    Hut: Future<Output = Result<agentplane_engine::platform::execute::Executed, StoreError>>,
{
    let outcomes = futures_util::future::join_all(records.iter().map(|record| {
        let parsed = parse(&record.body);
        let (run, start, platform) = (&run, &start, &platform);
        async move {
            let retry = match parsed {
                Parsed::PlatformRun(p) => {
                    let id = p.run_id;
                    match platform(p).await {
                        Ok(executed) => {
                            tracing::info!(run = %id, ?executed, "platform Run message handled");
                            false
                        }
                        Err(err) => {
                            tracing::warn!(run = %id, error = %err, "executing a platform Run failed: retried");
                            true
                        }
                    }
                }
                Parsed::StartRun(s) => {
                    let id = s.run_id.clone();
                    match start(s).await {
                        Ok(executed) => {
                            tracing::info!(run = %id, ?executed, "background run message handled");
                            false
                        }
                        Err(err) => {
                            tracing::warn!(run = %id, error = %err, "starting a background run failed: retried");
                            true
                        }
                    }
                }
                Parsed::Continuation(c) => {
                    let (session, turn, version) = (c.session_id, c.turn_id.clone(), c.version);
                    match run(c).await {
                        Ok(Continued::Ran(outcome)) => {
                            tracing::info!(%session, %turn, version, stop_reason = ?outcome.stop_reason, "continued a turn");
                            false
                        }
                        Ok(Continued::Stale) => {
                            tracing::info!(%session, %turn, version, "stale continuation: nothing to do");
                            false
                        }
                        Ok(Continued::Run(executed)) => {
                            tracing::info!(%session, %turn, version, ?executed, "continued a background run");
                            false
                        }
                        Err(err) => {
                            tracing::warn!(%session, %turn, version, error = %err, "continuing a turn failed: retried");
                            true
                        }
                    }
                }
                Parsed::UnknownKind(kind) => {
                    tracing::warn!(message = %record.id, %kind, "a runs message of an unknown kind: retried");
                    true
                }
                Parsed::Malformed(reason) => {
                    tracing::error!(message = %record.id, %reason, "a malformed runs message: dropped");
                    false
                }
            };
            retry.then(|| BatchItemFailure { item_identifier: record.id.clone() })
        }
    }))
    .await;
    SqsBatchResponse { batch_item_failures: outcomes.into_iter().flatten().collect() }
}

/// The Lambda handler: one SQS event through the engine (platform Runs through the app).
pub async fn handle_runs_event(app: &App, event: SqsEvent) -> SqsBatchResponse {
    let records: Vec<ReceivedMessage> = event.records.into_iter().map(ReceivedMessage::from).collect();
    let config = BackgroundConfig::from_env();
    let (run, start) = engine_seams(app.engine(), config);
    handle_runs_batch_all(&records, run, start, platform_seam(app)).await
}

/// The seam that executes platform Runs.
fn platform_seam<'a>(
    app: &'a App,
) -> impl Fn(ExecuteRun) -> Seam<'a, agentplane_engine::platform::execute::Executed> + 'a {
    move |p| -> Seam<'a, agentplane_engine::platform::execute::Executed> {
        Box::pin(async move {
            agentplane_engine::platform::execute::execute(&crate::platform::platform(app), &p)
                .await
                .map_err(Into::into)
        })
    }
}

/// A continuation: a background run's goes through its run (a slot first), any other straight
/// to its turn. A run that found no free slot is sent again after a pause and done with.
async fn continue_any(
    engine: &Engine,
    config: BackgroundConfig,
    c: Continuation,
) -> Result<Continued, StoreError> {
    let end = tokio::time::Instant::now() + config.invocation_budget;
    match Box::pin(engine.continue_run(&c, &config, end)).await? {
        Some(Executed::Waiting) => {
            engine.store.runs_queue()?.send_delayed(&RunsMessage::Continuation(c), config.wait_s).await?;
            Ok(Continued::Run(Executed::Waiting))
        }
        Some(executed) => Ok(Continued::Run(executed)),
        None => Box::pin(engine.continue_turn(&c)).await.map_err(Into::into),
    }
}

async fn start_any(engine: &Engine, config: BackgroundConfig, s: StartRun) -> Result<Executed, StoreError> {
    let end = tokio::time::Instant::now() + config.invocation_budget;
    let executed = Box::pin(engine.execute_run(&s, &config, end)).await?;
    if executed == Executed::Waiting {
        engine.enqueue_run(&s, config.wait_s).await?;
    }
    Ok(executed)
}

type Seam<'a, T> = std::pin::Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The two seams of a batch over the engine: continuations and run starts.
fn engine_seams<'a>(
    engine: &'a Engine,
    config: BackgroundConfig,
) -> (impl Fn(Continuation) -> Seam<'a, Continued>, impl Fn(StartRun) -> Seam<'a, Executed>) {
    (
        move |c| -> Seam<'a, Continued> { Box::pin(continue_any(engine, config, c)) },
        move |s| -> Seam<'a, Executed> { Box::pin(start_any(engine, config, s)) },
    )
}

/// How soon a failed message is delivered again by the in-process consumer (the queue's own
/// visibility timeout is Lambda's 16 minutes).
pub const LOCAL_RETRY_AFTER_S: i32 = 2;

/// One receive from the `runs` queue (waiting up to `wait_seconds`) and its batch through the
/// engine; see [`consume_batch`]. Returns how many messages it received.
pub async fn consume_runs_once(app: &App, wait_seconds: i32) -> Result<usize, StoreError> {
    let (run, start) = engine_seams(app.engine(), app.background);
    let messages = app.store.runs_queue()?.receive(10, wait_seconds).await?;
    if messages.is_empty() {
        return Ok(0);
    }
    let response = handle_runs_batch_all(&messages, run, start, platform_seam(app)).await;
    settle_batch(app.store.runs_queue()?, &messages, response).await;
    Ok(messages.len())
}

/// One receive from `queue` and its batch through `run`: what did not fail is deleted, what
/// failed is released for a retry in [`LOCAL_RETRY_AFTER_S`]. Returns how many messages it
/// received.
pub async fn consume_batch<F, Fut>(queue: &RunsQueue, wait_seconds: i32, run: F) -> Result<usize, StoreError>
where
    F: Fn(Continuation) -> Fut,
    Fut: Future<Output = Result<Continued, StoreError>>,
{
    consume_batch_with(queue, wait_seconds, run, |_| async {
        Err(StoreError::unavailable("no background runner"))
    })
    .await
}

/// [`consume_batch`] with the seam that starts background runs.
pub async fn consume_batch_with<F, Fut, G, Gut>(
    queue: &RunsQueue,
    wait_seconds: i32,
    run: F,
    start: G,
) -> Result<usize, StoreError>
where
    F: Fn(Continuation) -> Fut,
    Fut: Future<Output = Result<Continued, StoreError>>,
    G: Fn(StartRun) -> Gut,
    Gut: Future<Output = Result<Executed, StoreError>>,
{
    let messages = queue.receive(10, wait_seconds).await?;
    if messages.is_empty() {
        return Ok(0);
    }
    let response = handle_runs_batch_with(&messages, run, start).await;
    settle_batch(queue, &messages, response).await;
    Ok(messages.len())
}

/// What did not fail is deleted; what failed is released for a retry in [`LOCAL_RETRY_AFTER_S`].
async fn settle_batch(queue: &RunsQueue, messages: &[ReceivedMessage], response: SqsBatchResponse) {
    for m in messages {
        let done = if response.failed(&m.id) {
            queue.release(&m.receipt_handle, LOCAL_RETRY_AFTER_S).await
        } else {
            queue.delete(&m.receipt_handle).await
        };
        if let Err(err) = done {
            tracing::warn!(message = %m.id, error = %err, "settling a runs message with the queue failed");
        }
    }
}

/// The `run-execution` job in-process (local gateway, tests): long-polls the `runs` queue for
/// as long as the process lives. Returns at once if the app was given no queue. Each batch runs
/// in a task of its own, so that a panicking run ends its batch, not the consumer (its messages
/// come back after the queue's visibility timeout); up to [`LOCAL_BATCHES_IN_FLIGHT`] batches run
/// at once, as several Lambda invocations would, so a long turn does not hold up the queue.
pub async fn consume_runs_forever(app: App) {
    if app.store.runs_queue().is_err() {
        tracing::debug!("no runs queue: continuations are not consumed in-process");
        return;
    }
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(LOCAL_BATCHES_IN_FLIGHT));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else { return };
        let batch_app = app.clone();
        let (tell, told) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let _permit = permit;
            let outcome = tokio::spawn(consume_runs_once_then(batch_app, tell)).await;
            if let Err(err) = outcome {
                tracing::error!(error = %err, "a batch of the runs queue panicked");
            }
        });
        // The next receive starts once this one has its messages (or found none).
        match told.await {
            Ok(Ok(_)) | Err(_) => {}
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "receiving from the runs queue failed");
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    }
}

/// Batches the in-process consumer runs at once.
pub const LOCAL_BATCHES_IN_FLIGHT: usize = 4;

type Received = tokio::sync::oneshot::Sender<Result<usize, StoreError>>;

/// One receive and its batch, telling `received` how the receive went as soon as it is known.
async fn consume_runs_once_then(app: App, received: Received) {
    let queue = match app.store.runs_queue() {
        Ok(queue) => queue,
        Err(err) => {
            let _ = received.send(Err(err));
            return;
        }
    };
    let messages = match queue.receive(10, 5).await {
        Ok(messages) => messages,
        Err(err) => {
            let _ = received.send(Err(err));
            return;
        }
    };
    let _ = received.send(Ok(messages.len()));
    if messages.is_empty() {
        return;
    }
    let (run, start) = engine_seams(app.engine(), app.background);
    let response = handle_runs_batch_all(&messages, run, start, platform_seam(&app)).await;
    settle_batch(queue, &messages, response).await;
}
