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
use super::page::{Item, created_after};
use super::{backend, conditional, s};
use crate::{Store, StoreError};

mod endpoints;
mod messages;
mod reseal;

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
