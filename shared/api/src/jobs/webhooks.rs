//! The webhook jobs. `webhook-delivery` consumes the `webhooks` queue: an `event` message fans
//! an emitted event out into its messages, an `attempt` message makes that attempt (claimed
//! first, so a message delivered twice makes one attempt). `webhook-retry` runs on a schedule:
//! due attempts, and events whose queue message never came. In the local gateway and the tests
//! both run in-process ([`consume_webhooks_forever`], [`retry_forever`]).
//!
//! What becomes of a queue message: done when it ran, or was not this delivery's (made
//! already, settled, gone); a partial batch failure when storage failed or webhooks have no
//! key (SQS delivers it again, then dead-letters it); logged and dropped when it is not a
//! message at all; retried when its `kind` is unknown to this build.

use std::time::Duration;

use agentplane_engine::webhooks::WebhookConfig;
use agentplane_engine::webhooks::delivery::{Attempted, RetryReport, attempt_claimed, fan_out, retry_once};
use agentplane_store::{ReceivedMessage, Store, StoreError, WebhooksMessage};

use super::{BatchItemFailure, LOCAL_RETRY_AFTER_S, SqsBatchResponse, SqsEvent};
use crate::{App, edge};

/// The default interval of the in-process retry job (the deployed schedule's).
pub const DEFAULT_RETRY_INTERVAL: Duration = Duration::from_secs(60);

/// `AGENTPLANE_WEBHOOK_RETRY_INTERVAL_S` (seconds, fractions allowed, at least 0.05), else a
/// minute.
pub fn retry_interval_from_env() -> Duration {
    retry_interval(std::env::var("AGENTPLANE_WEBHOOK_RETRY_INTERVAL_S").ok().as_deref())
}

fn retry_interval(setting: Option<&str>) -> Duration {
    setting
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.05 && *s <= 3600.0)
        .map_or(DEFAULT_RETRY_INTERVAL, Duration::from_secs_f64)
}

enum Parsed {
    Message(WebhooksMessage),
    UnknownKind(String),
    Malformed(String),
}

fn parse(body: &str) -> Parsed {
    match serde_json::from_str::<WebhooksMessage>(body) {
        Ok(message) => Parsed::Message(message),
        Err(err) => {
            let kind = serde_json::from_str::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned));
            match kind {
                Some(kind) if kind != "event" && kind != "attempt" => Parsed::UnknownKind(kind),
                _ => Parsed::Malformed(err.to_string()),
            }
        }
    }
}

/// Handles one message; `true`: deliver it again.
async fn handle(store: &Store, config: &WebhookConfig, record: &ReceivedMessage) -> bool {
    match parse(&record.body) {
        Parsed::Message(WebhooksMessage::Event { project_id, event_id }) => {
            match fan_out(store, config, &project_id, &event_id).await {
                Ok(n) => {
                    tracing::info!(event = %event_id, messages = n, "fanned out a webhook event");
                    false
                }
                Err(err) => {
                    tracing::warn!(event = %event_id, error = %err, "fanning out a webhook event failed: retried");
                    true
                }
            }
        }
        Parsed::Message(WebhooksMessage::Attempt { owner, endpoint_id, event_id, created_at, attempt }) => {
            match attempt_claimed(store, config, &owner, &endpoint_id, &event_id, created_at, attempt, false)
                .await
            {
                Ok(Attempted::Made(made)) => {
                    tracing::info!(event = %event_id, endpoint = %endpoint_id, attempt, status = ?made.status_code, "webhook attempt");
                    false
                }
                Ok(other) => {
                    tracing::info!(event = %event_id, endpoint = %endpoint_id, attempt, outcome = ?other, "webhook attempt not made");
                    false
                }
                Err(err) => {
                    tracing::warn!(event = %event_id, endpoint = %endpoint_id, error = %err, "a webhook attempt failed: retried");
                    true
                }
            }
        }
        Parsed::UnknownKind(kind) => {
            tracing::warn!(message = %record.id, %kind, "a webhooks message of an unknown kind: retried");
            true
        }
        Parsed::Malformed(reason) => {
            tracing::error!(message = %record.id, %reason, "a malformed webhooks message: dropped");
            false
        }
    }
}

/// One batch of the `webhooks` queue, concurrently (each attempt is claimed once, so any order
/// is safe); the response names the messages to deliver again.
pub async fn handle_webhooks_batch(
    store: &Store,
    config: &WebhookConfig,
    records: &[ReceivedMessage],
) -> SqsBatchResponse {
    let outcomes = futures_util::future::join_all(records.iter().map(|record| async move {
        handle(store, config, record).await.then(|| BatchItemFailure { item_identifier: record.id.clone() })
    }))
    .await;
    SqsBatchResponse { batch_item_failures: outcomes.into_iter().flatten().collect() }
}

/// The Lambda handler of `webhook-delivery`.
pub async fn handle_webhooks_event(app: &App, event: SqsEvent) -> SqsBatchResponse {
    let records: Vec<ReceivedMessage> = event.records.into_iter().map(ReceivedMessage::from).collect();
    handle_webhooks_batch(&app.store, &app.webhooks, &records).await
}

/// One receive from the `webhooks` queue and its batch: what did not fail is deleted, what
/// failed is released for a retry in [`LOCAL_RETRY_AFTER_S`]. Returns how many it received.
pub async fn consume_webhooks_once(app: &App, wait_seconds: i32) -> Result<usize, StoreError> {
    let queue = app.store.webhooks_queue()?;
    let messages = queue.receive(10, wait_seconds).await?;
    if messages.is_empty() {
        return Ok(0);
    }
    let response = handle_webhooks_batch(&app.store, &app.webhooks, &messages).await;
    let settled = messages.iter().map(|m| {
        let failed = response.failed(&m.id);
        async move {
            let done = if failed {
                queue.release(&m.receipt_handle, LOCAL_RETRY_AFTER_S).await
            } else {
                queue.delete(&m.receipt_handle).await
            };
            if let Err(err) = done {
                tracing::warn!(message = %m.id, error = %err, "settling a webhooks message with the queue failed");
            }
        }
    });
    futures_util::future::join_all(settled).await;
    Ok(messages.len())
}

/// How many batches the in-process consumer runs at once (Lambda runs as many as the queue
/// needs).
pub const LOCAL_CONSUMERS: usize = 4;

/// `webhook-delivery` in-process: [`LOCAL_CONSUMERS`] loops long-poll the `webhooks` queue for
/// as long as the process lives (each batch in a task of its own). Returns at once without a
/// queue.
pub async fn consume_webhooks_forever(app: App) {
    if app.store.webhooks_queue().is_err() {
        tracing::debug!("no webhooks queue: webhook events are not consumed in-process");
        return;
    }
    let loops = (0..LOCAL_CONSUMERS).map(|_| consume_loop(app.clone()));
    futures_util::future::join_all(loops).await;
}

async fn consume_loop(app: App) {
    loop {
        let batch_app = app.clone();
        match tokio::spawn(async move { consume_webhooks_once(&batch_app, 5).await }).await {
            Ok(Ok(_)) => {}
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "receiving from the webhooks queue failed");
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            Err(err) => tracing::error!(error = %err, "a batch of the webhooks queue panicked"),
        }
    }
}

/// One pass of `webhook-retry` at the current time.
pub async fn webhook_retry_once(app: &App) -> Result<RetryReport, StoreError> {
    retry_once(&app.store, &app.webhooks, edge::now()).await.map_err(Into::into)
}

/// `webhook-retry` in-process: one pass every `interval`, for as long as the process lives.
pub async fn retry_forever(app: App, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        match webhook_retry_once(&app).await {
            Ok(report) if report == RetryReport::default() => {}
            Ok(report) => tracing::info!(?report, "webhook retry pass"),
            Err(err) => tracing::warn!(error = %err, "webhook retry pass failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_interval_takes_fractions_and_falls_back_to_a_minute() {
        assert_eq!(retry_interval(Some("0.2")), Duration::from_millis(200));
        assert_eq!(retry_interval(Some("5")), Duration::from_secs(5));
        for bad in [None, Some(""), Some("0"), Some("-1"), Some("NaN"), Some("soon"), Some("0.01")] {
            assert_eq!(retry_interval(bad), DEFAULT_RETRY_INTERVAL, "{bad:?}");
        }
    }

    #[test]
    fn bodies_are_told_apart_by_kind() {
        assert!(matches!(parse(r#"{"kind":"later","x":1}"#), Parsed::UnknownKind(k) if k == "later"));
        assert!(matches!(parse(r#"{"kind":"attempt"}"#), Parsed::Malformed(_)));
        assert!(matches!(parse("not json"), Parsed::Malformed(_)));
    }
}
