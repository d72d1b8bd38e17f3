//! From an emitted event to its attempts.
//!
//! - [`fan_out`]: an emitted event (the `webhooks` queue's `event` message, or the retry job for
//!   one whose message never came) becomes one message per endpoint receiving its project's events (the
//!   project's own and its tenant's) that takes its type; each new message's first attempt goes on the queue as an `attempt`
//!   message (`evt_` id, endpoint, attempt 1) and is due for the retry job after the queue's
//!   grace, in case that send is lost.
//! - [`attempt_claimed`]: one attempt, claimed first (so a queue message delivered twice, or the
//!   queue and the retry job at once, make one attempt), then signed, delivered and recorded.
//! - [`retry_once`]: the `webhook-retry` job's pass: events not fanned out after the grace, and
//!   messages whose next attempt is due.

use std::time::Duration;

use agentplane_domain::webhook::{
    self, Attempt, EndpointId, Message, MessageId, MessageStatus, Owner, Verdict,
};
use agentplane_domain::{ProjectId, Timestamp};
use futures_util::StreamExt;

use super::{SendError, WebhookConfig, disable, send_once};
use crate::ports::PortError;
use crate::ports::queues::WebhooksMessage;
use crate::ports::webhooks::{ClaimedAttempts, OutboxEvent, WebhookFanOut, WebhookRetry};

/// How long past the delivery timeout a claimed attempt holds its message.
const LEASE_MARGIN: Duration = Duration::from_secs(20);
/// The most events and messages one retry pass takes up.
const PASS_LIMIT: usize = 100;
/// Attempts one retry pass makes at once.
const PASS_CONCURRENCY: usize = 10;

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

/// Fans out the emitted event `event_id` of `project`; nothing when it was fanned out already.
/// Answers how many messages it wrote.
pub async fn fan_out<S: WebhookFanOut>(
    store: &S,
    config: &WebhookConfig,
    project: &ProjectId,
    event_id: &MessageId,
) -> Result<usize, PortError> {
    match store.unfanned_event(project, event_id).await? {
        Some(event) => fan_out_event(store, config, &event).await,
        None => Ok(0),
    }
}

/// Writes the messages of `event` (those already there are left), sends their first attempts
/// on the queue and takes the event out of the due index.
pub async fn fan_out_event<S: WebhookFanOut>(
    store: &S,
    config: &WebhookConfig,
    event: &OutboxEvent,
) -> Result<usize, PortError> {
    let endpoints = store.receiving_endpoints(&event.project_id).await?;
    let first_due = crate::now().plus_millis(millis(config.queue_grace));
    let created = store.create_messages(event, &endpoints, first_due).await?;
    if store.sends_webhooks() {
        let sends = created.iter().map(|m| async move {
            let first = WebhooksMessage::Attempt {
                owner: m.owner,
                endpoint_id: m.endpoint_id.clone(),
                event_id: m.id.clone(),
                created_at: m.created_at,
                attempt: 1,
            };
            store.send_webhook(&first).await
        });
        for result in futures_util::future::join_all(sends).await {
            if let Err(err) = result {
                tracing::warn!(event = %event.id, error = %err, "sending a first attempt failed: the retry job makes it");
            }
        }
    }
    store.mark_fanned_out(event).await?;
    Ok(created.len())
}

/// What became of an attempt that was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempted {
    /// Made and recorded.
    Made(Attempt),
    /// Not this caller's to make: made or claimed already, the message settled, or gone.
    NotOurs,
    /// The endpoint is disabled: the message failed without an attempt.
    EndpointDisabled,
}

/// Makes attempt `number` of the message (`created_at`, `event_id`) to `endpoint_id`, if it is
/// this caller's (see [`Attempted`]); `due_only`: only once its next attempt is due (the retry
/// job; the queue's first attempt does not wait for it).
#[allow(clippy::too_many_arguments)]
pub async fn attempt_claimed<S: ClaimedAttempts>(
    store: &S,
    config: &WebhookConfig,
    owner: &Owner,
    endpoint_id: &EndpointId,
    event_id: &MessageId,
    created_at: Timestamp,
    number: u32,
    due_only: bool,
) -> Result<Attempted, SendError> {
    if config.key.is_none() {
        return Err(SendError::NoKey);
    }
    let endpoint = match store.endpoint(owner, endpoint_id).await {
        Ok(endpoint) => endpoint,
        Err(PortError::NotFound) => {
            // The endpoint was deleted: its messages are never delivered, and leave the due
            // index so they do not crowd out the work that is.
            store.drop_undeliverable(endpoint_id, event_id, created_at).await?;
            return Ok(Attempted::NotOurs);
        }
        Err(err) => return Err(err.into()),
    };
    let now = crate::now();
    let lease = now.plus_millis(millis(config.timeout + LEASE_MARGIN));
    let claimed =
        store.claim_attempt(&endpoint.id, event_id, created_at, number, now, lease, due_only).await?;
    let Some(mut message) = claimed else { return Ok(Attempted::NotOurs) };
    if !endpoint.enabled {
        message.status = MessageStatus::Failed;
        message.next_attempt_at = None;
        record(store, &message, None, lease).await?;
        return Ok(Attempted::EndpointDisabled);
    }
    let attempt = send_once(config, &endpoint, &message).await?;
    let verdict = webhook::settle_scaled(&mut message, &attempt, config.retry_scale);
    record(store, &message, Some(&attempt), lease).await?;
    // A callback's 410 fails its message; the signer signs the project's other callbacks on.
    if verdict == Verdict::Gone && !endpoint.callback {
        disable(store, &endpoint).await?;
    }
    Ok(Attempted::Made(attempt))
}

async fn record<S: ClaimedAttempts>(
    store: &S,
    message: &Message,
    attempt: Option<&Attempt>,
    lease: Timestamp,
) -> Result<(), PortError> {
    match store.record_claimed_attempt(message, attempt, lease).await {
        // The lease ran out and another attempt took the message over: this one is not kept.
        Err(PortError::Conflict) => {
            tracing::warn!(message = %message.id, "an attempt outlived its lease and was not recorded");
            Ok(())
        }
        other => other,
    }
}

/// What one retry pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryReport {
    /// Emitted events it fanned out (their queue message never came).
    pub events: usize,
    /// Messages it found due.
    pub due: usize,
    pub attempted: usize,
    /// Due messages another caller had (or settled) first.
    pub skipped: usize,
    pub failed: usize,
}

/// The `webhook-retry` job's pass at `now`: fans out the events emitted more than the queue's
/// grace ago and never fanned out, then makes every due attempt (a few at once).
pub async fn retry_once<S: WebhookRetry>(
    store: &S,
    config: &WebhookConfig,
    now: Timestamp,
) -> Result<RetryReport, PortError> {
    let mut report = RetryReport::default();
    let stale = now.plus_millis(-millis(config.queue_grace));
    for event in store.unsent_events(stale, PASS_LIMIT).await? {
        match fan_out_event(store, config, &event).await {
            Ok(_) => report.events += 1,
            Err(err) => {
                tracing::warn!(event = %event.id, error = %err, "fanning out an unsent event failed");
                report.failed += 1;
            }
        }
    }
    let due = store.due_messages(now, PASS_LIMIT).await?;
    report.due = due.len();
    let attempts: Vec<_> = due
        .into_iter()
        .map(|m| async move {
            let next = m.attempts + 1;
            attempt_claimed(store, config, &m.owner, &m.endpoint_id, &m.id, m.created_at, next, true).await
        })
        .collect();
    let outcomes: Vec<Result<Attempted, SendError>> =
        futures_util::stream::iter(attempts).buffer_unordered(PASS_CONCURRENCY).collect().await;
    for outcome in outcomes {
        match outcome {
            Ok(Attempted::Made(_) | Attempted::EndpointDisabled) => report.attempted += 1,
            Ok(Attempted::NotOurs) => report.skipped += 1,
            Err(err) => {
                tracing::warn!(error = %err, "a due webhook attempt failed");
                report.failed += 1;
            }
        }
    }
    Ok(report)
}
