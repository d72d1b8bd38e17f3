//! The `rollback-restore` job: consumes the `rollbacks` queue. In Lambda an SQS event source
//! hands it batches; in the local gateway and the tests [`consume_rollbacks_forever`] long-polls
//! the same queue. A message whose restore failed (the sandbox unreachable, storage) is a
//! partial batch failure and comes again; one whose rollback has ended is done with (the
//! restore happens once); a body that is no rollback message is logged and dropped.

use std::time::Duration;

use agentplane_store::{ReceivedMessage, RunsQueue, StoreError};

use super::runs::{BatchItemFailure, LOCAL_RETRY_AFTER_S, SqsBatchResponse, SqsEvent};
use crate::App;
use agentplane_engine::platform::rollback::{self, Envelope};

/// Handles one batch; the response names the messages to deliver again.
pub async fn handle_rollbacks_batch(app: &App, records: &[ReceivedMessage]) -> SqsBatchResponse {
    let outcomes = futures_util::future::join_all(records.iter().map(|record| async move {
        let retry = match serde_json::from_str::<Envelope>(&record.body) {
            Ok(Envelope::Rollback(message)) => match rollback::restore(&crate::platform::platform(app), &message).await {
                Ok(done) => {
                    tracing::info!(run = %message.run_id, ?done, "rollback message handled");
                    false
                }
                Err(err) => {
                    tracing::warn!(run = %message.run_id, error = %err, "a rollback's restore failed: retried");
                    true
                }
            },
            Err(err) => {
                tracing::error!(message = %record.id, reason = %err, "a malformed rollbacks message: dropped");
                false
            }
        };
        retry.then(|| BatchItemFailure { item_identifier: record.id.clone() })
    }))
    .await;
    SqsBatchResponse { batch_item_failures: outcomes.into_iter().flatten().collect() }
}

/// The Lambda handler.
pub async fn handle_rollbacks_event(app: &App, event: SqsEvent) -> SqsBatchResponse {
    let records: Vec<ReceivedMessage> = event.records.into_iter().map(ReceivedMessage::from).collect();
    handle_rollbacks_batch(app, &records).await
}

/// One receive (waiting up to `wait_seconds`) and its batch: what did not fail is deleted, what
/// failed is released for a retry soon. Returns how many messages it received.
pub async fn consume_rollbacks_once(app: &App, wait_seconds: i32) -> Result<usize, StoreError> {
    let queue: &RunsQueue = app.store.rollbacks_queue()?;
    let messages = queue.receive(10, wait_seconds).await?;
    if messages.is_empty() {
        return Ok(0);
    }
    let response = handle_rollbacks_batch(app, &messages).await;
    for m in &messages {
        let done = if response.failed(&m.id) {
            queue.release(&m.receipt_handle, LOCAL_RETRY_AFTER_S).await
        } else {
            queue.delete(&m.receipt_handle).await
        };
        if let Err(err) = done {
            tracing::warn!(message = %m.id, error = %err, "settling a rollbacks message failed");
        }
    }
    Ok(messages.len())
}

/// The job in-process (local gateway, tests), for as long as the process lives; returns at once
/// without a `rollbacks` queue.
pub async fn consume_rollbacks_forever(app: App) {
    if app.store.rollbacks_queue().is_err() {
        tracing::debug!("no rollbacks queue: rollbacks are not consumed in-process");
        return;
    }
    loop {
        if let Err(err) = consume_rollbacks_once(&app, 5).await {
            tracing::warn!(error = %err, "receiving from the rollbacks queue failed");
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }
}
