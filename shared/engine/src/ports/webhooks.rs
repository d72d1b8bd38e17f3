//! What webhook delivery reads and writes: the endpoints messages go to, the emitted events
//! waiting to be fanned out into messages, the messages and their attempts, and the due index
//! the `webhook-retry` job walks (events never fanned out, messages whose next attempt is due).
//!
//! - [`WebhookAttempts`]: one attempt made outside a claim (a test message, a redelivery) and
//!   what a `410 Gone` does to its endpoint.
//! - [`ClaimedAttempts`]: attempts made from the queue or the retry job, each claimed first so
//!   that it is made once.
//! - [`WebhookFanOut`]: an emitted event becomes one message per endpoint receiving it, whose
//!   first attempts go on the `webhooks` queue.
//! - [`WebhookRetry`]: all of the above, and the work the retry job finds due.

use std::future::Future;

use agentplane_domain::webhook::{Attempt, Endpoint, EndpointId, Message, MessageId, Owner};
use agentplane_domain::{ProjectId, Timestamp};

use super::PortError;
use super::queues::Queues;

pub use super::outbox::OutboxEvent;

/// Attempts made outside a claim (a test message, a redelivery asked for), and the endpoint
/// they went to.
pub trait WebhookAttempts: Send + Sync {
    /// The endpoint `id` of `owner`; `NotFound` when there is none (it was deleted).
    fn endpoint(
        &self,
        owner: &Owner,
        id: &EndpointId,
    ) -> impl Future<Output = Result<Endpoint, PortError>> + Send;

    /// Replaces the endpoint, only if nobody changed it since `previous_update` (its
    /// `updated_at` when it was read); `Conflict` when somebody did, or when it was deleted
    /// meanwhile: read it again.
    fn replace_endpoint(
        &self,
        endpoint: &Endpoint,
        previous_update: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Records one attempt of `message` and the message's state after it, together.
    fn record_attempt(
        &self,
        message: &Message,
        attempt: &Attempt,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// Attempts claimed before they are made, so that a queue message delivered twice, or the queue
/// and the retry job at once, make one attempt.
pub trait ClaimedAttempts: WebhookAttempts {
    /// Claims attempt `number` of the message (`created_at`, `id`) to `endpoint`: only while the
    /// message is pending with exactly `number - 1` attempts made and no live claim, and with
    /// `due_only` only once its next attempt is due at `now`. The claim holds the message until
    /// `lease_until` (its next attempt is due then, should this one never be recorded).
    /// `None`: not this caller's attempt (made, claimed, or the message is settled or gone).
    #[allow(clippy::too_many_arguments)]
    fn claim_attempt(
        &self,
        endpoint: &EndpointId,
        id: &MessageId,
        created_at: Timestamp,
        number: u32,
        now: Timestamp,
        lease_until: Timestamp,
        due_only: bool,
    ) -> impl Future<Output = Result<Option<Message>, PortError>> + Send;

    /// Records a claimed attempt (when one was made) and the message's state after it, together,
    /// while the claim that `lease_until` names still holds the message; the claim ends with it.
    /// `Conflict`: the lease ran out and another attempt took the message over.
    fn record_claimed_attempt(
        &self,
        message: &Message,
        attempt: Option<&Attempt>,
        lease_until: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Takes the message (`created_at`, `id`) of the deleted `endpoint` off the due work, so
    /// that it is never attempted and expires with the other records; nothing when the message
    /// is gone.
    fn drop_undeliverable(
        &self,
        endpoint: &EndpointId,
        id: &MessageId,
        created_at: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// Emitted events fanned out into their messages, whose first attempts are sent on the
/// `webhooks` queue.
pub trait WebhookFanOut: Queues + Send + Sync {
    /// The emitted event `id` of `project` while it is not fanned out; `None` after.
    fn unfanned_event(
        &self,
        project: &ProjectId,
        id: &MessageId,
    ) -> impl Future<Output = Result<Option<OutboxEvent>, PortError>> + Send;

    /// Every endpoint that receives the events of `project`: the project's own, and its
    /// tenant's.
    fn receiving_endpoints(
        &self,
        project: &ProjectId,
    ) -> impl Future<Output = Result<Vec<Endpoint>, PortError>> + Send;

    /// Writes the message of `event` for each of `endpoints` that takes the event's type, its
    /// first attempt due at `first_due` (when the retry job takes it up if the queue does
    /// not); a message already there (a repeated fan-out) is left as it is. Answers the
    /// messages written now.
    fn create_messages(
        &self,
        event: &OutboxEvent,
        endpoints: &[Endpoint],
        first_due: Timestamp,
    ) -> impl Future<Output = Result<Vec<Message>, PortError>> + Send;

    /// Notes that `event` is fanned out: the retry job no longer finds it.
    fn mark_fanned_out(&self, event: &OutboxEvent) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// The `webhook-retry` job's view: fan-out and claimed attempts, and the work that is due.
pub trait WebhookRetry: WebhookFanOut + ClaimedAttempts {
    /// At most `limit` emitted events created at or before `until` and not fanned out, oldest
    /// first.
    fn unsent_events(
        &self,
        until: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<OutboxEvent>, PortError>> + Send;

    /// At most `limit` pending messages whose next attempt is due at `until`, soonest first.
    fn due_messages(
        &self,
        until: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Message>, PortError>> + Send;
}

/// Managing endpoints: made once (within the owner's limit), changed over the version read,
/// deleted; messages made outside a fan-out (a test); the project's callback signer.
pub trait WebhookEndpoints: WebhookAttempts {
    /// Writes a new endpoint; `Conflict` when the owner has as many endpoints as it may.
    fn create_endpoint(
        &self,
        endpoint: &Endpoint,
        max_per_project: u32,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Deletes the endpoint `id` of `owner` with its messages; `NotFound` when there is none.
    fn delete_endpoint(
        &self,
        owner: &Owner,
        id: &EndpointId,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Writes a new message (a test event's), pending.
    fn put_message(&self, message: &Message) -> impl Future<Output = Result<(), PortError>> + Send;

    /// The message `id` sent to the endpoint `endpoint`; `NotFound` when there is none.
    fn message(
        &self,
        endpoint: &EndpointId,
        id: &MessageId,
    ) -> impl Future<Output = Result<Message, PortError>> + Send;

    /// Writes the project's callback signer unless it has one; whether this call wrote it.
    fn ensure_callback_signer(
        &self,
        signer: &Endpoint,
    ) -> impl Future<Output = Result<bool, PortError>> + Send;
}

/// What the re-seal pass walks and writes: every endpoint (of every owner, the callback signers
/// included), each one's sealed secrets replaced only if the endpoint is unchanged since it was
/// read, and where the pass is.
pub trait WebhookReseal: Send + Sync {
    /// A page of endpoints after `after` (`None`: from the start), and where the next page
    /// starts (`None`: this was the last).
    fn endpoints_after(
        &self,
        after: Option<&agentplane_domain::platform::workspace_sweep::ScanPosition>,
    ) -> impl Future<
        Output = Result<
            (Vec<Endpoint>, Option<agentplane_domain::platform::workspace_sweep::ScanPosition>),
            PortError,
        >,
    > + Send;

    /// The endpoint `id` of `owner`; `NotFound` when it was deleted.
    fn reseal_endpoint(
        &self,
        owner: &Owner,
        id: &EndpointId,
    ) -> impl Future<Output = Result<Endpoint, PortError>> + Send;

    /// Writes `secrets` as `endpoint`'s (and nothing else: its `updated_at` stays), if its
    /// `updated_at` is still `endpoint.updated_at`; `Conflict` otherwise (or when it is gone).
    fn replace_secrets(
        &self,
        endpoint: &Endpoint,
        secrets: &[agentplane_domain::webhook::StoredSecret],
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Where an unfinished pass stopped (`None`: no pass is under way).
    fn reseal_cursor(
        &self,
    ) -> impl Future<
        Output = Result<Option<agentplane_domain::platform::workspace_sweep::ScanPosition>, PortError>,
    > + Send;

    /// Records where the pass is (`None`: it is through).
    fn save_reseal_cursor(
        &self,
        at: Option<&agentplane_domain::platform::workspace_sweep::ScanPosition>,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}
