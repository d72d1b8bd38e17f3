//! Emitting webhook events exactly once, and the due work of deliveries.
//!
//! | item           | PK              | SK            | GSI2PK (by_due)      | GSI2SK                |
//! |----------------|-----------------|---------------|----------------------|-----------------------|
//! | emitted event  | `PROJECT#{pid}` | `WHEVT#{evt}` | `WEBHOOK_EVENTS_DUE` | `{created ms:015}#{evt}` |
//!
//! **Emitting** is one more item in the transaction of the state change it reports
//! ([`emit_item`]): the event is written if and only if the change is, so a retried change
//! emits once. The writer then sends `{kind: "event"}` on the `webhooks` queue; the fan-out
//! ([`Webhooks::create_messages`]) writes one message per receiving endpoint, each a put that
//! must not exist yet (keyed by endpoint and `evt_` id), and deletes the event item. An event
//! whose queue send never happened stays in `WEBHOOK_EVENTS_DUE` and the `webhook-retry` job
//! fans it out.
//!
//! **Attempts** are claimed ([`Webhooks::claim_attempt`]): one conditional update names the
//! attempt (`attempts` = the ones before it, no live claim) and holds the message until a lease
//! ends, so a queue message delivered twice, or the queue and the retry job at once, make one
//! attempt. The claim also moves the message's due time to the lease's end: an attempt whose
//! process died is taken up again by the retry job.

use agentplane_domain::webhook::{Attempt, Endpoint, EndpointId, Message, MessageId, MessageStatus};
use agentplane_domain::{ProjectId, Timestamp};
use aws_sdk_dynamodb::types::{AttributeValue, Put, ReturnValue, TransactWriteItem};
use serde::{Deserialize, Serialize};

use super::keys::project_pk;
use super::webhooks::{AttemptItem, MESSAGES_DUE, MessageItem, attempt_sk, messages_pk};
use super::{backend, s};
use crate::resources::BY_DUE;
use crate::{StoreError, Webhooks};

/// The `by_due` partition of emitted events not fanned out yet.
pub const EVENTS_DUE: &str = "WEBHOOK_EVENTS_DUE";

pub use agentplane_engine::ports::outbox::OutboxEvent;

fn event_sk(id: &MessageId) -> String {
    format!("WHEVT#{id}")
}

#[derive(Serialize, Deserialize)]
struct OutboxItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI2PK")]
    gsi2pk: String,
    #[serde(rename = "GSI2SK")]
    gsi2sk: String,
    #[serde(flatten)]
    event: OutboxEvent,
}

/// The transaction item that emits `event`: add it to the very transaction of the state change
/// the event reports (a put that must not exist yet, so a transaction retried as is writes it
/// once). After the transaction succeeds, send it on with `Webhooks::dispatch` (a failed send
/// is repaired by the `webhook-retry` job).
pub fn emit_item(table: &str, event: &OutboxEvent) -> Result<TransactWriteItem, StoreError> {
    let item = OutboxItem {
        pk: project_pk(&event.project_id),
        sk: event_sk(&event.id),
        gsi2pk: EVENTS_DUE.to_owned(),
        gsi2sk: format!("{:015}#{}", event.created_at.unix_millis().max(0), event.id),
        event: event.clone(),
    };
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(serde_dynamo::to_item(item)?))
        .condition_expression("attribute_not_exists(PK)")
        .build()
        .map_err(StoreError::unavailable)?;
    Ok(TransactWriteItem::builder().put(put).build())
}

fn attr<T: Serialize>(value: T) -> Result<AttributeValue, StoreError> {
    Ok(serde_dynamo::to_attribute_value(value)?)
}

impl Webhooks<'_> {
    fn main(&self) -> &str {
        &self.store().names.main_table
    }

    /// [`emit_item`] on this store's main table.
    pub fn emit_item(&self, event: &OutboxEvent) -> Result<TransactWriteItem, StoreError> {
        emit_item(self.main(), event)
    }

    /// Tells the `webhooks` queue that `events` were emitted (one message each). Errors are the
    /// caller's to log: the retry job fans out what was never sent.
    pub async fn dispatch(&self, events: &[OutboxEvent]) -> Result<(), StoreError> {
        let queue = self.store().webhooks_queue()?;
        for event in events {
            queue
                .send_json(&crate::WebhooksMessage::Event {
                    project_id: event.project_id,
                    event_id: event.id.clone(),
                })
                .await?;
        }
        Ok(())
    }

    /// The emitted event `id` of `project`, while it is not fanned out.
    pub async fn outbox_event(
        &self,
        project: &ProjectId,
        id: &MessageId,
    ) -> Result<Option<OutboxEvent>, StoreError> {
        let item: Option<OutboxItem> =
            super::get_as(self.store(), self.main(), project_pk(project), event_sk(id)).await?;
        Ok(item.map(|i| i.event))
    }

    /// Writes the message of `event` for each of `endpoints` (those receiving the events of its
    /// project, see `Webhooks::receiving`) that receives its type, its first
    /// attempt due at `first_due` (when the retry job takes it up if the queue does not); a
    /// message already there (a repeated fan-out) is left as it is. Answers the messages written
    /// now.
    pub async fn create_messages(
        &self,
        event: &OutboxEvent,
        endpoints: &[Endpoint],
        first_due: Timestamp,
    ) -> Result<Vec<Message>, StoreError> {
        let messages: Vec<Message> = endpoints
            .iter()
            .filter(|e| e.receives(&event.event_type))
            .map(|endpoint| Message {
                id: event.id.clone(),
                owner: endpoint.owner,
                endpoint_id: endpoint.id.clone(),
                event_type: event.event_type.clone(),
                payload: event.payload.clone(),
                url: None,
                status: MessageStatus::Pending,
                attempts: 0,
                next_attempt_at: Some(first_due),
                created_at: event.created_at,
            })
            .collect();
        // Each endpoint's message is its own conditional write: they go at once.
        let written = futures_util::future::join_all(messages.iter().map(|m| self.put_message(m))).await;
        let mut created = Vec::new();
        for (message, result) in messages.into_iter().zip(written) {
            match result {
                Ok(()) => created.push(message),
                Err(StoreError::Conflict) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(created)
    }

    /// The event is fanned out: it leaves the due index.
    pub async fn fanned_out(&self, event: &OutboxEvent) -> Result<(), StoreError> {
        self.store()
            .dynamo
            .delete_item()
            .table_name(self.main())
            .key("PK", s(project_pk(&event.project_id)))
            .key("SK", s(event_sk(&event.id)))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// Emitted events created at or before `until` that are not fanned out, oldest first.
    pub async fn unsent_events(
        &self,
        until: Timestamp,
        limit: usize,
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        let items: Vec<OutboxItem> = self.due(EVENTS_DUE, until, limit).await?;
        Ok(items.into_iter().map(|i| i.event).collect())
    }

    /// Pending messages whose next attempt is due at `until`, soonest first.
    pub async fn due_messages(&self, until: Timestamp, limit: usize) -> Result<Vec<Message>, StoreError> {
        let items: Vec<MessageItem> = self.due(MESSAGES_DUE, until, limit).await?;
        Ok(items.into_iter().map(|i| i.message).collect())
    }

    async fn due<T: serde::de::DeserializeOwned>(
        &self,
        partition: &str,
        until: Timestamp,
        limit: usize,
    ) -> Result<Vec<T>, StoreError> {
        let out = self
            .store()
            .dynamo
            .query()
            .table_name(self.main())
            .index_name(BY_DUE)
            .key_condition_expression("GSI2PK = :partition AND GSI2SK <= :until")
            .expression_attribute_values(":partition", s(partition))
            .expression_attribute_values(":until", s(format!("{:015}~", until.unix_millis().max(0))))
            .scan_index_forward(true)
            .limit(i32::try_from(limit.clamp(1, 1000)).unwrap_or(100))
            .send()
            .await
            .map_err(backend)?;
        let mut found = Vec::new();
        for item in out.items.unwrap_or_default() {
            found.push(serde_dynamo::from_item(item)?);
        }
        Ok(found)
    }

    /// Claims attempt `number` of the message (`created_at`, `id`) of `endpoint`: only while it
    /// is pending with exactly `number - 1` attempts made and no live claim, and with `due_only`
    /// only once its next attempt is due. Holds it until `lease_until` (also its due time then).
    /// `None`: not this caller's attempt (made, claimed, or the message is settled or gone).
    #[allow(clippy::too_many_arguments)]
    pub async fn claim_attempt(
        &self,
        endpoint: &EndpointId,
        id: &MessageId,
        created_at: Timestamp,
        number: u32,
        now: Timestamp,
        lease_until: Timestamp,
        due_only: bool,
    ) -> Result<Option<Message>, StoreError> {
        let mut condition = "attribute_exists(PK) AND #status = :pending AND attempts = :before \
                             AND (attribute_not_exists(claimed_until) OR claimed_until < :now)"
            .to_owned();
        if due_only {
            condition.push_str(" AND next_attempt_at <= :now");
        }
        let result = self
            .store()
            .dynamo
            .update_item()
            .table_name(self.main())
            .key("PK", s(messages_pk(endpoint)))
            .key("SK", s(super::webhooks::message_sk_at(created_at, id)))
            .condition_expression(condition)
            .update_expression(
                "SET claimed_until = :lease, next_attempt_at = :lease, GSI2PK = :due, GSI2SK = :due_key",
            )
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":pending", s("pending"))
            .expression_attribute_values(":before", attr(number.saturating_sub(1))?)
            .expression_attribute_values(":now", attr(now)?)
            .expression_attribute_values(":lease", attr(lease_until)?)
            .expression_attribute_values(":due", s(MESSAGES_DUE))
            .expression_attribute_values(
                ":due_key",
                s(format!("{:015}#{endpoint}#{id}", lease_until.unix_millis().max(0))),
            )
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match result {
            Ok(out) => {
                let item =
                    out.attributes.ok_or_else(|| StoreError::Corrupt("claim returned no message".into()))?;
                let item: MessageItem = serde_dynamo::from_item(item)?;
                Ok(Some(item.message))
            }
            Err(err) if err.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => {
                Ok(None)
            }
            Err(err) => Err(backend(err)),
        }
    }

    /// Moves the message out of the due partition into the records' expiry one (its endpoint
    /// is gone: nothing will deliver it).
    pub async fn drop_due(
        &self,
        endpoint: &EndpointId,
        id: &MessageId,
        created_at: Timestamp,
    ) -> Result<(), StoreError> {
        let result = self
            .store()
            .dynamo
            .update_item()
            .table_name(self.main())
            .key("PK", s(messages_pk(endpoint)))
            .key("SK", s(super::webhooks::message_sk_at(created_at, id)))
            .condition_expression("attribute_exists(PK)")
            .update_expression("SET GSI2PK = :records, GSI2SK = :key")
            .expression_attribute_values(":records", s(super::webhooks::RECORDS_EXPIRE))
            .expression_attribute_values(
                ":key",
                s(super::webhooks::records_expire_key(created_at, endpoint, id)),
            )
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => {
                Ok(())
            }
            Err(err) => Err(backend(err)),
        }
    }

    /// Records a claimed attempt (if one was made) and the message's state after it, together,
    /// while the claim that `lease_until` names still holds it (`Conflict` otherwise: the lease
    /// ran out and another attempt took over). The claim ends with it.
    pub async fn record_claimed(
        &self,
        message: &Message,
        attempt: Option<&Attempt>,
        lease_until: Timestamp,
    ) -> Result<(), StoreError> {
        let message_put = Put::builder()
            .table_name(self.main())
            .set_item(Some(serde_dynamo::to_item(MessageItem::of(message))?))
            .condition_expression("claimed_until = :lease")
            .expression_attribute_values(":lease", attr(lease_until)?)
            .build()
            .map_err(StoreError::unavailable)?;
        let mut tx = self
            .store()
            .dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(message_put).build());
        if let Some(attempt) = attempt {
            let attempt_item = AttemptItem {
                pk: messages_pk(&message.endpoint_id),
                sk: attempt_sk(message, attempt.number),
                attempt: attempt.clone(),
            };
            let attempt_put = Put::builder()
                .table_name(self.main())
                .set_item(Some(serde_dynamo::to_item(attempt_item)?))
                .condition_expression("attribute_not_exists(PK)")
                .build()
                .map_err(StoreError::unavailable)?;
            tx = tx.transact_items(TransactWriteItem::builder().put(attempt_put).build());
        }
        tx.send().await.map_err(super::transaction_conflict)?;
        Ok(())
    }
}
