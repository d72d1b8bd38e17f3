//! The telemetry table's runtime half: runtime samples of Sessions and the latest usage counters
//! of each sandbox.
//!
//! | item           | PK                     | SK                               | TTL       |
//! |----------------|------------------------|----------------------------------|-----------|
//! | runtime sample | `RUNTIME#{session_id}` | `{interval start, 12 digits}#{allocation id}` | 7 days |
//! | sandbox usage  | `SANDBOX#{sandbox_id}` | `USAGE`                          | —         |
//!
//! A sample's key is its allocation and sampling interval, so a second sampler pass in the same
//! interval (a retried schedule, two overlapping runs) writes nothing: the put is conditional.

use agentplane_domain::SessionId;
use agentplane_domain::telemetry::history::SAMPLE_RETENTION_SECONDS;
use agentplane_domain::telemetry::{AllocationId, RuntimeSample, SandboxCounters};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use serde::{Deserialize, Serialize};

use super::page::Item;
use super::{backend, batch_get_as, conditional, s};
use crate::{Store, StoreError};

fn samples_pk(session: &SessionId) -> String {
    format!("RUNTIME#{session}")
}

fn sample_sk(interval_start: i64, allocation: Option<&AllocationId>) -> String {
    match allocation {
        Some(id) => format!("{:012}#{id}", interval_start.max(0)),
        None => format!("{:012}#none", interval_start.max(0)),
    }
}

/// The stored form of one sample of `session` for the interval starting at `interval_start`.
fn sample_item(session: &SessionId, interval_start: i64, sample: &RuntimeSample) -> SampleItem {
    let allocation = sample.allocation.as_ref().map(|a| &a.allocation_id);
    SampleItem {
        pk: samples_pk(session),
        sk: sample_sk(interval_start, allocation),
        sample: sample.clone(),
        expires_at: sample.sampled_at.unix_seconds().saturating_add(SAMPLE_RETENTION_SECONDS),
    }
}

fn usage_pk(sandbox_id: &str) -> String {
    format!("SANDBOX#{sandbox_id}")
}
const USAGE_SK: &str = "USAGE";

#[derive(Serialize, Deserialize)]
struct SampleItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    sample: RuntimeSample,
    expires_at: i64,
}

#[derive(Serialize, Deserialize)]
struct UsageItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(flatten)]
    usage: SandboxCounters,
}

/// What one history read fetched.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRead {
    pub samples: Vec<RuntimeSample>,
    /// DynamoDB items read (the query's scanned count).
    pub items_read: u64,
    pub requests: u32,
}

pub struct Telemetry<'a> {
    store: &'a Store,
}

impl<'a> Telemetry<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    /// Writes one sample of `session` for the sampling interval starting at `interval_start`.
    /// `Ok(false)` when that allocation already has a sample of that interval.
    pub async fn put_sample(
        &self,
        session: &SessionId,
        interval_start: i64,
        sample: &RuntimeSample,
    ) -> Result<bool, StoreError> {
        let item = sample_item(session, interval_start, sample);
        let out = self
            .store
            .dynamo
            .put_item()
            .table_name(&self.store.names.telemetry_table)
            .set_item(Some(serde_dynamo::to_item(item)?))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await;
        match out {
            Ok(_) => Ok(true),
            Err(e) => match conditional(e, |e| e.is_conditional_check_failed_exception()) {
                StoreError::Conflict => Ok(false),
                other => Err(other),
            },
        }
    }

    /// Writes many samples, each as [`Telemetry::put_sample`] would (conditional: a sample of an
    /// allocation and interval is written once), up to 100 in one TransactWriteItems. A
    /// transaction that fails because some samples exist tells which (its cancellation
    /// reasons); the others are sent again without them. What a transaction cannot settle
    /// (conflicts with a concurrent writer) is written one by one. One result per sample, in
    /// order: `Ok(true)` written, `Ok(false)` already there.
    pub async fn put_samples(
        &self,
        samples: &[(SessionId, i64, RuntimeSample)],
    ) -> Vec<Result<bool, StoreError>> {
        let mut results: Vec<Option<Result<bool, StoreError>>> = samples.iter().map(|_| None).collect();
        for (chunk_at, chunk) in samples.chunks(100).enumerate().map(|(i, c)| (i * 100, c)) {
            let mut pending: Vec<usize> = (0..chunk.len()).collect();
            for _round in 0..3 {
                if pending.is_empty() {
                    break;
                }
                let mut request = self.store.dynamo.transact_write_items();
                let mut built = true;
                for i in &pending {
                    let (session, interval_start, sample) = &chunk[*i];
                    match self.sample_put(session, *interval_start, sample) {
                        Ok(put) => {
                            request = request.transact_items(TransactWriteItem::builder().put(put).build())
                        }
                        Err(_) => built = false,
                    }
                }
                if !built {
                    break;
                }
                match request.send().await {
                    Ok(_) => {
                        for i in pending.drain(..) {
                            results[chunk_at + i] = Some(Ok(true));
                        }
                    }
                    Err(err) => {
                        let reasons: Vec<Option<String>> = err
                            .as_service_error()
                            .and_then(|e| match e {
                                TransactWriteItemsError::TransactionCanceledException(c) => Some(
                                    c.cancellation_reasons()
                                        .iter()
                                        .map(|r| r.code().map(str::to_owned))
                                        .collect(),
                                ),
                                _ => None,
                            })
                            .unwrap_or_default();
                        if reasons.len() != pending.len() {
                            break;
                        }
                        let mut settled = false;
                        let mut still = Vec::with_capacity(pending.len());
                        for (i, code) in pending.iter().zip(reasons) {
                            if code.as_deref() == Some("ConditionalCheckFailed") {
                                results[chunk_at + i] = Some(Ok(false));
                                settled = true;
                            } else {
                                still.push(*i);
                            }
                        }
                        pending = still;
                        if !settled {
                            break;
                        }
                    }
                }
            }
            for i in pending {
                let (session, interval_start, sample) = &chunk[i];
                results[chunk_at + i] = Some(self.put_sample(session, *interval_start, sample).await);
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(StoreError::unavailable("sample not written"))))
            .collect()
    }

    fn sample_put(
        &self,
        session: &SessionId,
        interval_start: i64,
        sample: &RuntimeSample,
    ) -> Result<Put, StoreError> {
        let item = sample_item(session, interval_start, sample);
        Put::builder()
            .table_name(&self.store.names.telemetry_table)
            .set_item(Some(serde_dynamo::to_item(item)?))
            .condition_expression("attribute_not_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)
    }

    /// The samples of `session` whose sampling interval starts in `[from, to)` (Unix seconds).
    pub async fn samples(&self, session: &SessionId, from: i64, to: i64) -> Result<SampleRead, StoreError> {
        let mut read = SampleRead { samples: Vec::new(), items_read: 0, requests: 0 };
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .store
                .dynamo
                .query()
                .table_name(&self.store.names.telemetry_table)
                .key_condition_expression("PK = :pk AND SK BETWEEN :lo AND :hi")
                .expression_attribute_values(":pk", s(samples_pk(session)))
                .expression_attribute_values(":lo", s(format!("{:012}", from.max(0))))
                .expression_attribute_values(":hi", s(format!("{:012}", to.max(0))))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(backend)?;
            read.requests += 1;
            read.items_read += u64::try_from(out.scanned_count).unwrap_or(0);
            for item in out.items.unwrap_or_default() {
                read.samples.push(serde_dynamo::from_item::<_, SampleItem>(item)?.sample);
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(read),
            }
        }
    }

    /// Records the latest counters of a sandbox; an older report never replaces a newer one.
    pub async fn put_sandbox_counters(&self, usage: &SandboxCounters) -> Result<(), StoreError> {
        let item =
            UsageItem { pk: usage_pk(&usage.sandbox_id), sk: USAGE_SK.to_owned(), usage: usage.clone() };
        self.store
            .dynamo
            .put_item()
            .table_name(&self.store.names.telemetry_table)
            .set_item(Some(serde_dynamo::to_item(item)?))
            .condition_expression("attribute_not_exists(PK) OR reported_at <= :at")
            .expression_attribute_values(":at", serde_dynamo::to_attribute_value(usage.reported_at)?)
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    pub async fn sandbox_counters(&self, sandbox_id: &str) -> Result<Option<SandboxCounters>, StoreError> {
        let out = self
            .store
            .dynamo
            .get_item()
            .table_name(&self.store.names.telemetry_table)
            .key("PK", s(usage_pk(sandbox_id)))
            .key("SK", s(USAGE_SK))
            .send()
            .await
            .map_err(backend)?;
        match out.item {
            Some(item) => Ok(Some(serde_dynamo::from_item::<_, UsageItem>(item)?.usage)),
            None => Ok(None),
        }
    }

    /// The latest counters of many sandboxes at once (BatchGetItem, 100 keys a call), by
    /// sandbox id; sandboxes without counters are left out.
    pub async fn sandbox_counters_many(
        &self,
        sandbox_ids: &[&str],
    ) -> Result<std::collections::HashMap<String, SandboxCounters>, StoreError> {
        let keys = sandbox_ids.iter().map(|id| (usage_pk(id), USAGE_SK.to_owned()));
        let items: Vec<UsageItem> = batch_get_as(self.store, &self.store.names.telemetry_table, keys).await?;
        Ok(items.into_iter().map(|i| (i.usage.sandbox_id.clone(), i.usage)).collect())
    }
}
