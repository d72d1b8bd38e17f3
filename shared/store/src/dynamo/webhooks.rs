//! Webhook endpoints, their per-project count, and the messages and attempts sent to them.
//!
//! | item      | PK                | SK                                  | GSI1PK (by_created)        | GSI1SK     |
//! |-----------|-------------------|-------------------------------------|----------------------------|------------|
//! | endpoint  | `PROJECT#{pid}`   | `WEBHOOK#{ep}`                      | `PROJECT#{pid}#WEBHOOKS`   | created#id |
//! | count     | `PROJECT#{pid}`   | `WEBHOOKS#COUNT`                    | —                          | —          |
//! | message   | `WEBHOOK#{ep}`    | `MSG#{created ms:015}#{evt}`        | —                          | —          |
//! | attempt   | `WEBHOOK#{ep}`    | `ATT#{created ms:015}#{evt}#{n:04}` | —                          | —          |
//! | locator   | `WEBHOOK#{ep}`    | `MSGID#{evt}`                       | —                          | —          |
//!
//! A pending message with a next attempt is also in the `by_due` index (GSI2PK
//! `WEBHOOK_MESSAGES_DUE`, GSI2SK `{next attempt ms:015}#{ep}#{evt}`), where the
//! `webhook-retry` job finds it; the emitted events not yet fanned out are in
//! `WEBHOOK_EVENTS_DUE` (see `webhook_events.rs`).
//!
//! The count item holds `endpoint_count`; every create and delete changes it in the same
//! transaction as the endpoint, under the condition `endpoint_count < 50` (create) and
//! `endpoint_count > 0` (delete), so concurrent creates never pass the cap. Messages and
//! attempts live in the endpoint's own partition, newest last by their message's creation, so
//! one page of messages and the attempts of exactly those messages are two range queries. A
//! message's locator (written with it) holds its creation time, so a message named by its id
//! (redelivery) is two reads.

use agentplane_domain::page::{Page, PageLimit, PageRequest, created_sort_key};
use agentplane_domain::webhook::{Attempt, Endpoint, EndpointId, MAX_ENDPOINTS, Message, MessageId};
use agentplane_domain::{ProjectId, Timestamp};
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use serde::{Deserialize, Serialize};

use super::keys::project_pk;
use super::page::{Item, query_created, start_key};
use super::{backend, conditional, s};
use crate::{Store, StoreError};

fn endpoint_sk(id: &EndpointId) -> String {
    format!("WEBHOOK#{id}")
}
fn endpoints_list(project: &ProjectId) -> String {
    format!("PROJECT#{project}#WEBHOOKS")
}
const COUNT_SK: &str = "WEBHOOKS#COUNT";
pub(super) fn messages_pk(endpoint: &EndpointId) -> String {
    format!("WEBHOOK#{endpoint}")
}
pub(super) fn message_sk(message: &Message) -> String {
    message_sk_at(message.created_at, &message.id)
}
pub(super) fn message_sk_at(created_at: Timestamp, id: &MessageId) -> String {
    format!("MSG#{:015}#{id}", created_at.unix_millis().max(0))
}
fn locator_sk(id: &MessageId) -> String {
    format!("MSGID#{id}")
}
/// The `by_due` partition of pending messages with a next attempt.
pub const MESSAGES_DUE: &str = "WEBHOOK_MESSAGES_DUE";
pub(super) fn attempt_sk(message: &Message, number: u32) -> String {
    format!("{}{:04}", attempt_prefix(message), number)
}
fn attempt_prefix(message: &Message) -> String {
    format!("ATT#{:015}#{}#", message.created_at.unix_millis().max(0), message.id)
}

#[derive(Serialize, Deserialize)]
struct EndpointItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK")]
    gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
    #[serde(flatten)]
    endpoint: Endpoint,
}

impl EndpointItem {
    fn of(endpoint: &Endpoint) -> Self {
        Self {
            pk: project_pk(&endpoint.project_id),
            sk: endpoint_sk(&endpoint.id),
            gsi1pk: endpoints_list(&endpoint.project_id),
            gsi1sk: created_sort_key(endpoint.created_at, &endpoint.id),
            endpoint: endpoint.clone(),
        }
    }
}

#[derive(Serialize, Deserialize)]
pub(super) struct MessageItem {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    #[serde(rename = "GSI2PK", default, skip_serializing_if = "Option::is_none")]
    pub gsi2pk: Option<String>,
    #[serde(rename = "GSI2SK", default, skip_serializing_if = "Option::is_none")]
    pub gsi2sk: Option<String>,
    /// While an attempt is under way: until when it holds the message (see `claim_attempt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_until: Option<Timestamp>,
    #[serde(flatten)]
    pub message: Message,
}

impl MessageItem {
    /// The item of `message`: in the due index while it is pending with a next attempt.
    pub fn of(message: &Message) -> Self {
        let due = match (message.status, message.next_attempt_at) {
            (agentplane_domain::webhook::MessageStatus::Pending, Some(at)) => {
                Some(format!("{:015}#{}#{}", at.unix_millis().max(0), message.endpoint_id, message.id))
            }
            _ => None,
        };
        Self {
            pk: messages_pk(&message.endpoint_id),
            sk: message_sk(message),
            gsi2pk: due.as_ref().map(|_| MESSAGES_DUE.to_owned()),
            gsi2sk: due,
            claimed_until: None,
            message: message.clone(),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct LocatorItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    created_at: Timestamp,
}

#[derive(Serialize, Deserialize)]
pub(super) struct AttemptItem {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    #[serde(flatten)]
    pub attempt: Attempt,
}

/// A message with its attempts, oldest attempt first.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageWithAttempts {
    pub message: Message,
    pub attempts: Vec<Attempt>,
}

pub struct Webhooks<'a> {
    store: &'a Store,
}

impl<'a> Webhooks<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    pub(crate) fn store(&self) -> &'a Store {
        self.store
    }

    /// Writes a new endpoint and counts it; `Conflict` when the project already has
    /// [`MAX_ENDPOINTS`].
    pub async fn create(&self, endpoint: &Endpoint) -> Result<(), StoreError> {
        let item = serde_dynamo::to_item(EndpointItem::of(endpoint))?;
        super::counted::put(self.store, &counter(&endpoint.project_id), MAX_ENDPOINTS, None, item).await
    }

    async fn raw(&self, project: &ProjectId, id: &EndpointId) -> Result<Item, StoreError> {
        super::get_item(self.store, self.table(), project_pk(project), endpoint_sk(id))
            .await?
            .ok_or(StoreError::NotFound)
    }

    pub async fn get(&self, project: &ProjectId, id: &EndpointId) -> Result<Endpoint, StoreError> {
        let item: EndpointItem = serde_dynamo::from_item(self.raw(project, id).await?)?;
        Ok(item.endpoint)
    }

    /// Every endpoint of the project (at most [`MAX_ENDPOINTS`]), oldest first.
    pub async fn all(&self, project: &ProjectId) -> Result<Vec<Endpoint>, StoreError> {
        let items: Vec<EndpointItem> = super::query_all(
            self.store
                .dynamo
                .query()
                .table_name(self.table())
                .index_name(crate::resources::BY_CREATED)
                .key_condition_expression("GSI1PK = :list")
                .expression_attribute_values(":list", s(endpoints_list(project))),
        )
        .await?;
        Ok(items.into_iter().map(|i| i.endpoint).collect())
    }

    /// How many endpoints the project has (the count item).
    pub async fn count(&self, project: &ProjectId) -> Result<u32, StoreError> {
        super::counted::read(self.store, &counter(project)).await
    }

    pub async fn list(
        &self,
        project: &ProjectId,
        page: &PageRequest,
        after: Option<&EndpointId>,
    ) -> Result<Page<Endpoint>, StoreError> {
        let start = match after {
            Some(id) => Some(start_key(&self.raw(project, id).await?).ok_or(StoreError::NotFound)?),
            None => None,
        };
        let page: Page<EndpointItem> =
            query_created(self.store, &endpoints_list(project), start, page.limit, page.order).await?;
        Ok(Page { items: page.items.into_iter().map(|i| i.endpoint).collect(), has_more: page.has_more })
    }

    /// Replaces the endpoint if nobody changed it since `previous_update` (`Conflict`: re-read
    /// and re-apply; `NotFound`-like conflicts too, when it was deleted meanwhile).
    pub async fn replace(&self, endpoint: &Endpoint, previous_update: Timestamp) -> Result<(), StoreError> {
        self.store
            .dynamo
            .put_item()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(EndpointItem::of(endpoint))?))
            .condition_expression("attribute_exists(PK) AND updated_at = :prev")
            .expression_attribute_values(":prev", serde_dynamo::to_attribute_value(previous_update)?)
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    /// Deletes the endpoint and uncounts it; `NotFound` when it is not there.
    pub async fn delete(&self, project: &ProjectId, id: &EndpointId) -> Result<(), StoreError> {
        super::counted::delete(self.store, &counter(project), project_pk(project), endpoint_sk(id)).await
    }

    /// Writes a new message and its locator.
    pub async fn put_message(&self, message: &Message) -> Result<(), StoreError> {
        let pk = messages_pk(&message.endpoint_id);
        let item = MessageItem::of(message);
        let locator = LocatorItem { pk, sk: locator_sk(&message.id), created_at: message.created_at };
        let mut tx = self.store.dynamo.transact_write_items();
        for item in [serde_dynamo::to_item(item)?, serde_dynamo::to_item(locator)?] {
            let put = Put::builder()
                .table_name(self.table())
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(PK)")
                .build()
                .map_err(StoreError::unavailable)?;
            tx = tx.transact_items(TransactWriteItem::builder().put(put).build());
        }
        tx.send().await.map_err(super::transaction_conflict)?;
        Ok(())
    }

    /// The message `id` of `endpoint`; `NotFound` when it has none such.
    pub async fn message(&self, endpoint: &EndpointId, id: &MessageId) -> Result<Message, StoreError> {
        let pk = messages_pk(endpoint);
        let locator: LocatorItem = super::get_as(self.store, self.table(), pk.clone(), locator_sk(id))
            .await?
            .ok_or(StoreError::NotFound)?;
        let sk = message_sk_at(locator.created_at, id);
        let item: MessageItem =
            super::get_as(self.store, self.table(), pk, sk).await?.ok_or(StoreError::NotFound)?;
        Ok(item.message)
    }

    /// Records one attempt of `message` and the message's state after it, together.
    pub async fn record_attempt(&self, message: &Message, attempt: &Attempt) -> Result<(), StoreError> {
        let pk = messages_pk(&message.endpoint_id);
        let attempt_item =
            AttemptItem { pk, sk: attempt_sk(message, attempt.number), attempt: attempt.clone() };
        let message_item = MessageItem::of(message);
        let puts = [serde_dynamo::to_item(message_item)?, serde_dynamo::to_item(attempt_item)?];
        let mut tx = self.store.dynamo.transact_write_items();
        for item in puts {
            let put = Put::builder()
                .table_name(self.table())
                .set_item(Some(item))
                .build()
                .map_err(StoreError::unavailable)?;
            tx = tx.transact_items(TransactWriteItem::builder().put(put).build());
        }
        tx.send().await.map_err(backend)?;
        Ok(())
    }

    /// The endpoint's newest `limit` messages, newest first, each with its attempts.
    pub async fn messages(
        &self,
        endpoint: &EndpointId,
        limit: PageLimit,
    ) -> Result<Vec<MessageWithAttempts>, StoreError> {
        let query = self
            .store
            .dynamo
            .query()
            .table_name(self.table())
            .key_condition_expression("PK = :pk AND begins_with(SK, :msg)")
            .expression_attribute_values(":pk", s(messages_pk(endpoint)))
            .expression_attribute_values(":msg", s("MSG#"))
            .scan_index_forward(false)
            .consistent_read(true);
        let page = super::page::keyset_page(query, limit, None, |item| {
            Ok(serde_dynamo::from_item::<_, MessageItem>(item)?.message)
        })
        .await?;
        let (Some(newest), Some(oldest)) = (page.items.first(), page.items.last()) else {
            return Ok(Vec::new());
        };
        let attempts: Vec<AttemptItem> = super::query_all(
            self.store
                .dynamo
                .query()
                .table_name(self.table())
                .key_condition_expression("PK = :pk AND SK BETWEEN :low AND :high")
                .expression_attribute_values(":pk", s(messages_pk(endpoint)))
                .expression_attribute_values(":low", s(attempt_prefix(oldest)))
                .expression_attribute_values(":high", s(format!("{}~", attempt_prefix(newest))))
                .consistent_read(true),
        )
        .await?;
        Ok(page
            .items
            .into_iter()
            .map(|message| {
                let mut of: Vec<Attempt> = attempts
                    .iter()
                    .filter(|a| a.attempt.message_id == message.id)
                    .map(|a| a.attempt.clone())
                    .collect();
                of.sort_by_key(|a| a.number);
                MessageWithAttempts { message, attempts: of }
            })
            .collect())
    }
}

/// The key of the project's endpoint count, which a turn reads with what it reads anyway to
/// know whether to emit events at all.
pub fn count_key(project: &ProjectId) -> (String, String) {
    (project_pk(project), COUNT_SK.to_owned())
}

/// Whether a count item (as read) counts any endpoint.
pub fn counts_any(item: &std::collections::HashMap<String, AttributeValue>) -> bool {
    super::counted::count_of(Some(item), COUNT_ATTR) > 0
}

const COUNT_ATTR: &str = "endpoint_count";

/// The project's endpoint count.
fn counter(project: &ProjectId) -> super::counted::Counter {
    let (pk, sk) = count_key(project);
    super::counted::Counter { pk, sk, attr: COUNT_ATTR }
}
