//! The `runs` queue: continuations of paused turns (and, later, background runs) as SQS
//! messages. Only the functions granted the queue build this client (`Store::with_runs_queue`).
//!
//! A message body is JSON tagged by `kind` (`{"kind":"continuation", …}`), so that later kinds
//! share the queue and the consumer can tell them apart.

use std::sync::Arc;

use agentplane_domain::action::Continuation;
use aws_config::SdkConfig;
use aws_sdk_sqs::error::DisplayErrorContext;
use serde::Serialize;
use tokio::sync::OnceCell;

use crate::StoreError;

pub use agentplane_engine::ports::queues::{RunsMessage, WebhooksMessage};

/// The `webhooks` queue's client: the same SQS client as the `runs` queue's, bound to that
/// queue (`Store::with_webhooks_queue`).
pub type WebhooksQueue = RunsQueue;

/// A message as received: its id (what a partial batch failure names), the handle that deletes
/// or releases it, and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    pub id: String,
    pub receipt_handle: String,
    pub body: String,
}

/// An SQS client bound to the `runs` queue. The queue URL is resolved once, on first use (or
/// given, as the deployed stack does: its functions may send but not look queues up).
#[derive(Clone, Debug)]
pub struct RunsQueue {
    client: aws_sdk_sqs::Client,
    name: String,
    url: Arc<OnceCell<String>>,
}

impl RunsQueue {
    /// The queue named `name`; `url` when already known (`AGENTPLANE_RUNS_QUEUE_URL`).
    pub fn new(sdk: &SdkConfig, name: String, url: Option<String>) -> Self {
        let cell = match url {
            Some(url) => OnceCell::new_with(Some(url)),
            None => OnceCell::new(),
        };
        Self { client: aws_sdk_sqs::Client::new(sdk), name, url: Arc::new(cell) }
    }

    /// The queue's URL, looked up by name the first time.
    pub async fn url(&self) -> Result<&str, StoreError> {
        let url = self
            .url
            .get_or_try_init(|| async {
                self.client
                    .get_queue_url()
                    .queue_name(&self.name)
                    .send()
                    .await
                    .map_err(|e| StoreError::unavailable(DisplayErrorContext(e)))?
                    .queue_url
                    .ok_or_else(|| StoreError::unavailable("no queue url"))
            })
            .await?;
        Ok(url)
    }

    /// Sends one continuation.
    pub async fn send(&self, continuation: &Continuation) -> Result<(), StoreError> {
        self.send_message(&RunsMessage::Continuation(continuation.clone())).await
    }

    /// Sends one message of any kind.
    pub async fn send_message(&self, message: &RunsMessage) -> Result<(), StoreError> {
        self.send_delayed(message, 0).await
    }

    /// Sends one message, delivered no sooner than `delay_s` (0..=900) seconds from now.
    pub async fn send_delayed(&self, message: &RunsMessage, delay_s: i32) -> Result<(), StoreError> {
        self.send_json_delayed(message, delay_s).await
    }

    /// Sends one message, its body `message` as JSON.
    pub async fn send_json(&self, message: &impl Serialize) -> Result<(), StoreError> {
        self.send_json_delayed(message, 0).await
    }

    /// Sends one message, its body `message` as JSON, delivered no sooner than `delay_s` seconds.
    pub async fn send_json_delayed(&self, message: &impl Serialize, delay_s: i32) -> Result<(), StoreError> {
        let body = serde_json::to_string(message).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        self.client
            .send_message()
            .queue_url(self.url().await?)
            .message_body(body)
            .delay_seconds(delay_s.clamp(0, 900))
            .send()
            .await
            .map_err(|e| StoreError::unavailable(DisplayErrorContext(e)))?;
        Ok(())
    }

    /// Up to `max` (1..=10) messages, waiting at most `wait_seconds` (0..=20) for the first.
    /// A received message is hidden for the queue's visibility timeout unless deleted or
    /// released.
    pub async fn receive(&self, max: i32, wait_seconds: i32) -> Result<Vec<ReceivedMessage>, StoreError> {
        let out = self
            .client
            .receive_message()
            .queue_url(self.url().await?)
            .max_number_of_messages(max.clamp(1, 10))
            .wait_time_seconds(wait_seconds.clamp(0, 20))
            .send()
            .await
            .map_err(|e| StoreError::unavailable(DisplayErrorContext(e)))?;
        Ok(out
            .messages
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| {
                Some(ReceivedMessage {
                    id: m.message_id?,
                    receipt_handle: m.receipt_handle?,
                    body: m.body.unwrap_or_default(),
                })
            })
            .collect())
    }

    /// Done with a message: it is never delivered again.
    pub async fn delete(&self, receipt_handle: &str) -> Result<(), StoreError> {
        self.client
            .delete_message()
            .queue_url(self.url().await?)
            .receipt_handle(receipt_handle)
            .send()
            .await
            .map_err(|e| StoreError::unavailable(DisplayErrorContext(e)))?;
        Ok(())
    }

    /// Makes a received message visible again after `seconds` (a retry sooner than the queue's
    /// visibility timeout).
    pub async fn release(&self, receipt_handle: &str, seconds: i32) -> Result<(), StoreError> {
        self.client
            .change_message_visibility()
            .queue_url(self.url().await?)
            .receipt_handle(receipt_handle)
            .visibility_timeout(seconds.max(0))
            .send()
            .await
            .map_err(|e| StoreError::unavailable(DisplayErrorContext(e)))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continuation_is_tagged_by_kind_and_reads_back() -> Result<(), serde_json::Error> {
        let c = Continuation {
            project_id: agentplane_domain::ProjectId::from_random([1; 16]),
            session_id: agentplane_domain::SessionId::from_random([2; 16]),
            turn_id: "turn_1".into(),
            version: 3,
        };
        let body = serde_json::to_value(RunsMessage::Continuation(c.clone()))?;
        assert_eq!(body["kind"], "continuation");
        assert_eq!(body["turn_id"], "turn_1");
        assert_eq!(body["version"], 3);
        assert_eq!(serde_json::from_value::<RunsMessage>(body)?, RunsMessage::Continuation(c));
        Ok(())
    }
}
