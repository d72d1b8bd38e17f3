//! The queues the use cases send work to: `runs` (paused turns carried on, background runs,
//! Platform Runs), `webhooks` (events to fan out, delivery attempts) and `rollbacks`.

use std::future::Future;

use agentplane_domain::action::Continuation;
use agentplane_domain::platform::run::RollbackMessage;
use agentplane_domain::webhook::{EndpointId, MessageId};
use agentplane_domain::{ProjectId, Timestamp};
use serde::{Deserialize, Serialize};

use super::PortError;

/// One message of the `runs` queue, as its body holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunsMessage {
    /// Carry a paused turn on.
    Continuation(Continuation),
    /// Start a background run.
    StartRun(agentplane_domain::agent_run::StartRun),
    /// Execute a queued platform Run.
    PlatformRun(agentplane_domain::platform::run::ExecuteRun),
}

/// One message of the `webhooks` queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WebhooksMessage {
    /// An event was emitted: write its messages (the fan-out) and send their first attempts.
    Event { project_id: ProjectId, event_id: MessageId },
    /// Make attempt `attempt` of the message `event_id` to `endpoint_id`.
    Attempt {
        /// The endpoint's owner (`project_id` or `tenant_id`).
        #[serde(flatten)]
        owner: agentplane_domain::webhook::Owner,
        endpoint_id: EndpointId,
        event_id: MessageId,
        created_at: Timestamp,
        attempt: u32,
    },
}

/// One message of the `rollbacks` queue, as its body holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RollbacksMessage {
    Rollback(RollbackMessage),
}

/// Sending to the queues; a function without the grant to a queue answers an error.
pub trait Queues: Send + Sync {
    /// Sends to `runs`, delivered no sooner than `delay_s` seconds (0 to 900).
    fn send_run(
        &self,
        message: &RunsMessage,
        delay_s: i32,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Whether this function may send to `webhooks` (one that may not leaves delivery to the
    /// `webhook-retry` job).
    fn sends_webhooks(&self) -> bool;

    /// Sends to `webhooks`.
    fn send_webhook(&self, message: &WebhooksMessage) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Sends to `rollbacks`.
    fn send_rollback(&self, message: &RollbacksMessage)
    -> impl Future<Output = Result<(), PortError>> + Send;
}
