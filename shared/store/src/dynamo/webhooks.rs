//! Webhook endpoints of projects and tenants, their counts, and the messages and attempts sent
//! to them.
//!
//! | item      | PK                | SK                                  | GSI1PK (by_created)        | GSI1SK     |
//! |-----------|-------------------|-------------------------------------|----------------------------|------------|
//! | endpoint  | `PROJECT#{pid}` or `TENANT#{tid}` | `WEBHOOK#{ep}`      | `{PK}#WEBHOOKS`            | created#id |
//! | count     | `PROJECT#{pid}`   | `WEBHOOKS#COUNT`                    | —                          | —          |
//! | message   | `WEBHOOK#{ep}`    | `MSG#{created ms:015}#{evt}`        | —                          | —          |
//! | attempt   | `WEBHOOK#{ep}`    | `ATT#{created ms:015}#{evt}#{n:04}` | —                          | —          |
//! | locator   | `WEBHOOK#{ep}`    | `MSGID#{evt}`                       | —                          | —          |
//!
//! A pending message with a next attempt is also in the `by_due` index (GSI2PK
//! `WEBHOOK_MESSAGES_DUE`, GSI2SK `{next attempt ms:015}#{ep}#{evt}`), where the
//! `webhook-retry` job finds it; the emitted events not yet fanned out are in
//! `WEBHOOK_EVENTS_DUE` (see `webhook_events.rs`). Any other message (settled, or left with
//! no endpoint to deliver it) is in `WEBHOOK_RECORDS_EXPIRE` instead, GSI2SK `{created +
//! RECORD_RETENTION_DAYS, ms:015}#{ep}#{evt}`, where the retention sweep finds it to delete it
//! with its attempts and locator. A redelivery moves it back to the due partition, and the
//! sweep's delete is conditional on its partition, so a message redelivered meanwhile stays.
//!
//! **Counts.** At most 50 endpoints per tenant, a project without a tenant being its own. A
//! project's count item holds `endpoint_count`, its own endpoints. A tenant's item (`TENANT#`,
//! `TENANT`) holds `endpoint_count`, every endpoint of the tenant (its own and all its
//! projects'), and `tenant_endpoint_count`, its own. Every create and delete changes the counts
//! it touches in the same transaction as the endpoint: the cap is checked on the tenant's count
//! (or the lone project's), `> 0` on a delete, and the project's tenant is checked unchanged
//! (a guard on the project item), so concurrent creates never pass the cap. Attaching a project
//! to a tenant moves its count there (see `tenants.rs`). Messages and
//! attempts live in the endpoint's own partition, newest last by their message's creation, so
//! one page of messages and the attempts of exactly those messages are two range queries. A
//! message's locator (written with it) holds its creation time, so a message named by its id
//! (redelivery) is two reads.

use agentplane_domain::page::{Page, PageLimit, PageRequest, created_sort_key};
use agentplane_domain::tenant::TenantId;
use agentplane_domain::webhook::{
    Attempt, Endpoint, EndpointId, MAX_ENDPOINTS, Message, MessageId, MessageStatus, Owner,
    RECORD_RETENTION_DAYS,
};
use agentplane_domain::{ProjectId, Timestamp};
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, TransactWriteItem};
use serde::{Deserialize, Serialize};

use super::keys::{PROJECT_SK, project_pk};
use super::keys::{TENANT_SK, tenant_pk};
use super::page::{Item, query_created, start_key};
use super::{backend, conditional, s};
use crate::{Store, StoreError};

fn endpoint_sk(id: &EndpointId) -> String {
    format!("WEBHOOK#{id}")
}
/// The partition of an owner's endpoints.
pub(super) fn owner_pk(owner: &Owner) -> String {
    match owner {
        Owner::Project(p) => project_pk(p),
        Owner::Tenant(t) => tenant_pk(t),
    }
}
fn endpoints_list(owner: &Owner) -> String {
    format!("{}#WEBHOOKS", owner_pk(owner))
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
/// The `by_due` partition of messages that nothing delivers any more, by when their records
/// expire.
pub const RECORDS_EXPIRE: &str = "WEBHOOK_RECORDS_EXPIRE";
/// The message's key in [`RECORDS_EXPIRE`]: when its records expire, then its endpoint and id.
pub(super) fn records_expire_key(created_at: Timestamp, endpoint: &EndpointId, id: &MessageId) -> String {
    let at = created_at.plus_seconds(RECORD_RETENTION_DAYS * 86_400);
    format!("{:015}#{endpoint}#{id}", at.unix_millis().max(0))
}
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
    /// Absent for the callback signer, which is never listed.
    #[serde(rename = "GSI1PK", default, skip_serializing_if = "Option::is_none")]
    gsi1pk: Option<String>,
    #[serde(rename = "GSI1SK", default, skip_serializing_if = "Option::is_none")]
    gsi1sk: Option<String>,
    #[serde(flatten)]
    endpoint: Endpoint,
}

impl EndpointItem {
    fn of(endpoint: &Endpoint) -> Self {
        let listed = !endpoint.callback;
        Self {
            pk: owner_pk(&endpoint.owner),
            sk: endpoint_sk(&endpoint.id),
            gsi1pk: listed.then(|| endpoints_list(&endpoint.owner)),
            gsi1sk: listed.then(|| created_sort_key(endpoint.created_at, &endpoint.id)),
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
    /// The item of `message`: in the due partition while it is pending with a next attempt, in
    /// the records' expiry partition otherwise.
    pub fn of(message: &Message) -> Self {
        let (partition, key) = match (message.status, message.next_attempt_at) {
            (MessageStatus::Pending, Some(at)) => (
                MESSAGES_DUE,
                format!("{:015}#{}#{}", at.unix_millis().max(0), message.endpoint_id, message.id),
            ),
            _ => (RECORDS_EXPIRE, records_expire_key(message.created_at, &message.endpoint_id, &message.id)),
        };
        Self {
            pk: messages_pk(&message.endpoint_id),
            sk: message_sk(message),
            gsi2pk: Some(partition.to_owned()),
            gsi2sk: Some(key),
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

    /// Writes a new endpoint and counts it; `Conflict` when its tenant (or its lone project)
    /// has [`MAX_ENDPOINTS`] already, `NotFound` when its owner does not exist.
    pub async fn create(&self, endpoint: &Endpoint) -> Result<(), StoreError> {
        for _ in 0..3 {
            let (counters, guard) = self.counters_of(&endpoint.owner).await?;
            let item = serde_dynamo::to_item(EndpointItem::of(endpoint))?;
            let counts: Vec<super::counted::Counted<'_>> = counters
                .iter()
                .map(|counter| super::counted::Counted { counter, max: Some(MAX_ENDPOINTS) })
                .collect();
            match super::counted::put_counted(
                self.store,
                &counts,
                guard.item.into_iter().collect(),
                None,
                item,
            )
            .await
            {
                // The cap, or the project moved to another tenant meanwhile: which one, the
                // project says.
                Err(StoreError::Conflict) if self.moved(&guard.tenant_of, &endpoint.owner).await? => continue,
                other => return other,
            }
        }
        Err(StoreError::Conflict)
    }

    /// The counts an endpoint of `owner` takes, and the guard that the owner is as read (a
    /// project still of the same tenant, a tenant still there).
    async fn counters_of(&self, owner: &Owner) -> Result<(Vec<super::counted::Counter>, Guard), StoreError> {
        match owner {
            Owner::Project(project) => {
                let tenant = self.store.projects().get(project).await?.tenant_id;
                let check = ConditionCheck::builder()
                    .table_name(self.table())
                    .key("PK", s(project_pk(project)))
                    .key("SK", s(PROJECT_SK));
                let check = match tenant {
                    Some(t) => check
                        .condition_expression("tenant_id = :t")
                        .expression_attribute_values(":t", s(t.to_string())),
                    None => {
                        check.condition_expression("attribute_exists(PK) AND attribute_not_exists(tenant_id)")
                    }
                };
                let mut counters = vec![counter(project)];
                counters.extend(tenant.map(|t| tenant_counter(&t, false)));
                let check = check.build().map_err(StoreError::unavailable)?;
                let item = TransactWriteItem::builder().condition_check(check).build();
                Ok((counters, Guard { item: Some(item), tenant_of: Some(tenant) }))
            }
            // The tenant's count lives on its item, which must exist: that is the guard.
            Owner::Tenant(tenant) => {
                Ok((vec![tenant_counter(tenant, true)], Guard { item: None, tenant_of: None }))
            }
        }
    }

    /// Whether `owner` (a project) is now of another tenant than `read` said.
    async fn moved(&self, read: &Option<Option<TenantId>>, owner: &Owner) -> Result<bool, StoreError> {
        match (owner, read) {
            (Owner::Project(project), Some(was)) => match self.store.projects().get(project).await {
                Ok(now) => Ok(now.tenant_id != *was),
                Err(StoreError::NotFound) => Err(StoreError::NotFound),
                Err(err) => Err(err),
            },
            _ => Ok(false),
        }
    }

    async fn raw(&self, owner: &Owner, id: &EndpointId) -> Result<Item, StoreError> {
        super::get_item(self.store, self.table(), owner_pk(owner), endpoint_sk(id))
            .await?
            .ok_or(StoreError::NotFound)
    }

    pub async fn get(&self, owner: &Owner, id: &EndpointId) -> Result<Endpoint, StoreError> {
        let item: EndpointItem = serde_dynamo::from_item(self.raw(owner, id).await?)?;
        Ok(item.endpoint)
    }

    /// Every endpoint of the owner (at most [`MAX_ENDPOINTS`]), oldest first.
    pub async fn all(&self, owner: &Owner) -> Result<Vec<Endpoint>, StoreError> {
        let items: Vec<EndpointItem> = super::query_all(
            self.store
                .dynamo
                .query()
                .table_name(self.table())
                .index_name(crate::resources::BY_CREATED)
                .key_condition_expression("GSI1PK = :list")
                .expression_attribute_values(":list", s(endpoints_list(owner))),
        )
        .await?;
        Ok(items.into_iter().map(|i| i.endpoint).collect())
    }

    /// Every endpoint that receives the events of `project`: its own, and its tenant's.
    pub async fn receiving(&self, project: &ProjectId) -> Result<Vec<Endpoint>, StoreError> {
        let tenant = match self.store.projects().get(project).await {
            Ok(p) => p.tenant_id,
            Err(StoreError::NotFound) => None,
            Err(err) => return Err(err),
        };
        let mut endpoints = self.all(&Owner::Project(*project)).await?;
        if let Some(t) = tenant {
            endpoints.extend(self.all(&Owner::Tenant(t)).await?);
        }
        endpoints.retain(|e| e.owner.covers(*project, tenant));
        Ok(endpoints)
    }

    /// How many endpoints of its own the project has (the count item).
    pub async fn count(&self, project: &ProjectId) -> Result<u32, StoreError> {
        super::counted::read(self.store, &counter(project)).await
    }

    /// Whether any endpoint receives the events of `project` (its own, or its tenant's).
    pub async fn any_receiving(&self, project: &ProjectId) -> Result<bool, StoreError> {
        if self.count(project).await? > 0 {
            return Ok(true);
        }
        match self.store.projects().get(project).await?.tenant_id {
            Some(t) => Ok(self.store.tenants().get(&t).await?.tenant_endpoint_count > 0),
            None => Ok(false),
        }
    }

    pub async fn list(
        &self,
        owner: &Owner,
        page: &PageRequest,
        after: Option<&EndpointId>,
    ) -> Result<Page<Endpoint>, StoreError> {
        let start = match after {
            Some(id) => Some(start_key(&self.raw(owner, id).await?).ok_or(StoreError::NotFound)?),
            None => None,
        };
        let page: Page<EndpointItem> =
            query_created(self.store, &endpoints_list(owner), start, page.limit, page.order).await?;
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
    pub async fn delete(&self, owner: &Owner, id: &EndpointId) -> Result<(), StoreError> {
        for _ in 0..3 {
            let (counters, guard) = self.counters_of(owner).await?;
            let counters: Vec<&super::counted::Counter> = counters.iter().collect();
            match super::counted::delete_counted(
                self.store,
                &counters,
                guard.item.into_iter().collect(),
                owner_pk(owner),
                endpoint_sk(id),
            )
            .await
            {
                Err(StoreError::Conflict) => continue,
                other => return other,
            }
        }
        Err(StoreError::Conflict)
    }

    /// Writes the project's callback signer unless it has one already (its first secret then
    /// stays as it is); `true` when this call wrote it.
    pub async fn ensure_callback_signer(&self, signer: &Endpoint) -> Result<bool, StoreError> {
        let put = self
            .store
            .dynamo
            .put_item()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(EndpointItem::of(signer))?))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await;
        match put.map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception())) {
            Ok(_) => Ok(true),
            Err(StoreError::Conflict) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// The items that write a new message and its locator, for a transaction (each must not
    /// exist yet, so a retried transaction writes them once).
    pub fn message_items(&self, message: &Message) -> Result<Vec<TransactWriteItem>, StoreError> {
        let pk = messages_pk(&message.endpoint_id);
        let item = MessageItem::of(message);
        let locator = LocatorItem { pk, sk: locator_sk(&message.id), created_at: message.created_at };
        let mut items = Vec::new();
        for item in [serde_dynamo::to_item(item)?, serde_dynamo::to_item(locator)?] {
            let put = Put::builder()
                .table_name(self.table())
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(PK)")
                .build()
                .map_err(StoreError::unavailable)?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        Ok(items)
    }

    /// Writes a new message and its locator.
    pub async fn put_message(&self, message: &Message) -> Result<(), StoreError> {
        let items = self.message_items(message)?;
        self.store
            .dynamo
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map_err(super::transaction_conflict)?;
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

impl Webhooks<'_> {
    /// Up to `limit` messages whose records expired at `now`, the oldest first (what the
    /// retention sweep deletes; what it deletes leaves the index, so the next read starts where
    /// this one's work stopped).
    pub async fn expired_records(&self, now: Timestamp, limit: usize) -> Result<Vec<Message>, StoreError> {
        let until = format!("{:015}#~", now.unix_millis().max(0));
        let items: Vec<MessageItem> =
            super::due_page(self.store, self.table(), RECORDS_EXPIRE, until, limit).await?;
        Ok(items.into_iter().map(|item| item.message).collect())
    }

    /// Deletes `message` with its locator and attempts, while it is still in the records'
    /// expiry partition (`Conflict` once a redelivery took it back; `NotFound` when it is gone).
    pub async fn delete_records(&self, message: &Message) -> Result<(), StoreError> {
        let pk = messages_pk(&message.endpoint_id);
        let attempts: Vec<AttemptItem> = super::query_all(
            self.store
                .dynamo
                .query()
                .table_name(self.table())
                .key_condition_expression("PK = :pk AND begins_with(SK, :prefix)")
                .expression_attribute_values(":pk", s(pk.clone()))
                .expression_attribute_values(":prefix", s(attempt_prefix(message)))
                .consistent_read(true),
        )
        .await?;
        let delete = |sk: String| {
            aws_sdk_dynamodb::types::Delete::builder()
                .table_name(self.table())
                .key("PK", s(pk.clone()))
                .key("SK", s(sk))
        };
        let mut items = vec![
            delete(message_sk(message))
                .condition_expression("GSI2PK = :records")
                .expression_attribute_values(":records", s(RECORDS_EXPIRE)),
            delete(locator_sk(&message.id)),
        ];
        items.extend(attempts.into_iter().map(|a| delete(a.sk)));
        let items = items
            .into_iter()
            .map(|d| {
                Ok(TransactWriteItem::builder().delete(d.build().map_err(StoreError::unavailable)?).build())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        // The message (conditional) is in the first transaction; attempts beyond what one
        // transaction holds follow it, orphans by then.
        for (n, chunk) in items.chunks(100).enumerate() {
            let sent = self
                .store
                .dynamo
                .transact_write_items()
                .set_transact_items(Some(chunk.to_vec()))
                .send()
                .await;
            match sent.map_err(super::transaction_conflict) {
                Ok(_) => {}
                // The condition failed: the message is gone, or a redelivery took it back.
                Err(StoreError::Conflict) if n == 0 => {
                    return Err(match self.message(&message.endpoint_id, &message.id).await {
                        Err(StoreError::NotFound) => StoreError::NotFound,
                        _ => StoreError::Conflict,
                    });
                }
                Err(err) => return Err(err),
            }
        }
        Ok(())
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
    super::counted::Counter::new(pk, sk, COUNT_ATTR)
}

/// The tenant's count of all its endpoints (the cap's), on the tenant's item; `own`: its own
/// endpoints' count moves with it.
fn tenant_counter(tenant: &TenantId, own: bool) -> super::counted::Counter {
    super::counted::Counter {
        pk: tenant_pk(tenant),
        sk: TENANT_SK.to_owned(),
        attr: COUNT_ATTR,
        also: own.then_some(TENANT_OWN_ATTR),
        must_exist: true,
    }
}

/// The attribute of a tenant's item counting its own (tenant-wide) endpoints.
pub(super) const TENANT_OWN_ATTR: &str = "tenant_endpoint_count";

/// The condition an endpoint's write holds to, and what it read of a project's tenant.
struct Guard {
    item: Option<TransactWriteItem>,
    /// For a project's endpoint: the project's tenant as read.
    tenant_of: Option<Option<TenantId>>,
}
