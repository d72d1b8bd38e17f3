//! Background runs and the per-tenant slots that admit them, in the main table.
//!
//! | item | PK                    | SK           | GSI1 (by_created)                |
//! |------|-----------------------|--------------|----------------------------------|
//! | run  | `PROJECT#{pid}`       | `RUN#{run}`  | `PROJECT#{pid}#RUNS` / created#run |
//! | slot | `SLOTS#{tenant key}`  | `SLOT#{i}`   | —                                |
//!
//! A run's status moves by conditional updates only (`status = :from`). A running run holds one
//! of its tenant's slots (`0..max`): the slot is taken in the same transaction that moves the run
//! to `running` (the slot free, or its lease past, or already this run's), renewed while the run
//! goes on, and given back in the same transaction that moves the run on. A holder that crashed
//! stops renewing, so its slot comes back when the lease runs out. The run itself carries the
//! same lease (`lease_until`, renewed with the slot) while it is `running`.
//!
//! Each run is in the `by_due` index, where the retention sweep finds it, in the partition of
//! what is due for it next: while it is `running`, its lease (GSI2PK `AGENT_RUNS_LEASE`, GSI2SK
//! `{lease ms:015}#{pid}#{run}`), so a run whose executor died is found once its lease lapsed
//! (`background_sweep`); otherwise its retention (GSI2PK `AGENT_RUNS_EXPIRE`, GSI2SK
//! `{expires ms:015}#{pid}#{run}`), after which it is deleted (the item's TTL is the backstop).
//! A run that started before leases moves under its lease at its first renewal.

use agentplane_domain::agent_run::{AgentRun, RunId, RunStatus};
use agentplane_domain::page::{Page, PageRequest, created_sort_key};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use aws_sdk_dynamodb::types::{AttributeValue, Put, ReturnValue, TransactWriteItem, Update};
use serde::{Deserialize, Serialize};

use super::keys::project_pk;
use super::page::{keyset_page, start_key};
use super::{conditional, get_as, s, slots, transaction_conflict};
use crate::resources::BY_CREATED;
use crate::{OutboxEvent, Store, StoreError};

pub fn run_sk(id: &RunId) -> String {
    format!("RUN#{id}")
}

pub fn runs_list(project: &ProjectId) -> String {
    format!("PROJECT#{project}#RUNS")
}

pub fn slots_pk(tenant_key: &str) -> String {
    format!("SLOTS#{tenant_key}")
}

pub use super::slots::slot_sk;

#[derive(Serialize, Deserialize)]
struct RunItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK")]
    gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
    /// Absent on runs stored before the retention sweep deleted runs (their TTL does).
    #[serde(rename = "GSI2PK", default, skip_serializing_if = "Option::is_none")]
    gsi2pk: Option<String>,
    #[serde(rename = "GSI2SK", default, skip_serializing_if = "Option::is_none")]
    gsi2sk: Option<String>,
    #[serde(flatten)]
    run: AgentRun,
}

/// The `by_due` partition of background runs, by when they expire.
pub const RUNS_EXPIRE: &str = "AGENT_RUNS_EXPIRE";
/// The `by_due` partition of running background runs, by when their lease lapses.
pub const RUNS_LEASE: &str = "AGENT_RUNS_LEASE";

/// A run's sort key in its `by_due` partition: due at `at`.
fn due_sk(at: Timestamp, run: &AgentRun) -> String {
    format!("{:015}#{}#{}", at.unix_millis().max(0), run.project_id, run.id)
}

pub use super::slots::Slot;

pub use agentplane_engine::ports::background::SlotRef;

/// Where the slot `slot` is stored.
fn place(slot: &SlotRef) -> slots::Place {
    slots::Place { pk: slots_pk(&slot.tenant_key), index: slot.index }
}

pub use agentplane_engine::ports::background::StartRefused;

pub use agentplane_engine::ports::background::Announce;

pub use agentplane_engine::ports::background::RunOutcome;

pub struct AgentRuns<'a> {
    store: &'a Store,
}

fn attr<T: Serialize>(value: T) -> Result<AttributeValue, StoreError> {
    Ok(serde_dynamo::to_attribute_value(value)?)
}

impl<'a> AgentRuns<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    /// Up to `limit` runs whose retention ended at `now`, the oldest first (what the retention
    /// sweep deletes; what it deletes leaves the index, so the next read starts where this
    /// one's work stopped).
    pub async fn expired(&self, now: Timestamp, limit: usize) -> Result<Vec<AgentRun>, StoreError> {
        let until = format!("{:015}#~", now.unix_millis().max(0));
        let items: Vec<RunItem> =
            super::due_page(self.store, self.table(), RUNS_EXPIRE, until, limit).await?;
        Ok(items.into_iter().map(|item| item.run).collect())
    }

    /// Up to `limit` running runs whose lease lapsed at `now`, the oldest lapse first (the index
    /// is read eventually consistent: a run renewed just now may be among them, and
    /// [`AgentRuns::settle_lapsed`] leaves it be).
    pub async fn lapsed(&self, now: Timestamp, limit: usize) -> Result<Vec<AgentRun>, StoreError> {
        let until = format!("{:015}#~", now.unix_millis().max(0));
        let items: Vec<RunItem> = super::due_page(self.store, self.table(), RUNS_LEASE, until, limit).await?;
        Ok(items.into_iter().map(|item| item.run).collect())
    }

    /// Deletes `run`, whose retention ended (`NotFound` when it is gone already).
    pub async fn delete_expired(&self, run: &AgentRun) -> Result<(), StoreError> {
        let result = self
            .store
            .dynamo
            .delete_item()
            .table_name(self.table())
            .key("PK", s(project_pk(&run.project_id)))
            .key("SK", s(run_sk(&run.id)))
            .condition_expression("attribute_exists(PK)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(err) => Err(match conditional(err, |e| e.is_conditional_check_failed_exception()) {
                StoreError::Conflict => StoreError::NotFound,
                other => other,
            }),
        }
    }

    /// Stores a new run, and the event announcing it (written with it, or not at all).
    pub async fn create(&self, run: &AgentRun, emit: &OutboxEvent) -> Result<(), StoreError> {
        let item = RunItem {
            pk: project_pk(&run.project_id),
            sk: run_sk(&run.id),
            gsi1pk: runs_list(&run.project_id),
            gsi1sk: created_sort_key(run.created_at, &run.id),
            gsi2pk: Some(RUNS_EXPIRE.to_owned()),
            gsi2sk: Some(due_sk(run.expires_at, run)),
            run: run.clone(),
        };
        let put = Put::builder()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(item)?))
            .condition_expression("attribute_not_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)?;
        self.store
            .dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put).build())
            .transact_items(self.store.webhooks().emit_item(emit)?)
            .send()
            .await
            .map_err(transaction_conflict)?;
        Ok(())
    }

    /// A run of `project`; `NotFound` for another project's or a missing one.
    pub async fn get(&self, project: &ProjectId, id: &RunId) -> Result<AgentRun, StoreError> {
        let item: Option<RunItem> = get_as(self.store, self.table(), project_pk(project), run_sk(id)).await?;
        item.map(|i| i.run).ok_or(StoreError::NotFound)
    }

    /// A page of the project's runs, newest first unless asked otherwise, filtered by session
    /// and status. An `after` that names no run of the project is `NotFound`.
    pub async fn list(
        &self,
        project: &ProjectId,
        page: &PageRequest,
        after: Option<&RunId>,
        session: Option<&SessionId>,
        status: Option<RunStatus>,
    ) -> Result<Page<AgentRun>, StoreError> {
        let start = match after {
            Some(id) => {
                let item = super::get_item(self.store, self.table(), project_pk(project), run_sk(id))
                    .await?
                    .ok_or(StoreError::NotFound)?;
                Some(start_key(&item).ok_or(StoreError::NotFound)?)
            }
            None => None,
        };
        let mut query = self
            .store
            .dynamo
            .query()
            .table_name(self.table())
            .index_name(BY_CREATED)
            .key_condition_expression("GSI1PK = :list")
            .expression_attribute_values(":list", s(runs_list(project)))
            .scan_index_forward(page.order == agentplane_domain::page::Order::Asc);
        let mut filters = Vec::new();
        if let Some(session) = session {
            filters.push("session_id = :session");
            query = query.expression_attribute_values(":session", s(session.to_string()));
        }
        if let Some(status) = status {
            filters.push("#status = :status");
            query = query
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":status", s(status.as_str()));
        }
        if !filters.is_empty() {
            query = query.filter_expression(filters.join(" AND "));
        }
        let page: Page<RunItem> =
            keyset_page(query, page.limit, start, |item| Ok(serde_dynamo::from_item(item)?)).await?;
        Ok(Page { items: page.items.into_iter().map(|i| i.run).collect(), has_more: page.has_more })
    }

    /// The slots of a tenant that are held (by anyone, lease past or not).
    pub async fn slots(&self, tenant_key: &str) -> Result<Vec<Slot>, StoreError> {
        slots::held(self.store, &slots_pk(tenant_key)).await
    }

    fn slot_put(
        &self,
        slot: &SlotRef,
        run: &RunId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Put, StoreError> {
        slots::take(self.store, &place(slot), &run.to_string(), now, lease_until, None)
    }

    fn slot_release(&self, slot: &SlotRef, run: &RunId) -> Result<TransactWriteItem, StoreError> {
        let delete = slots::release(self.store, &place(slot), &run.to_string())?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }

    /// Moves the run from `from` (`queued`, or `requires_action` when its turn carries on) to
    /// `running` and takes a free slot of `tenant_key` (`0..max`) for it, in one transaction
    /// per slot tried. The free slots are read first, so a full tenant costs one read.
    pub async fn start(
        &self,
        run: &AgentRun,
        from: RunStatus,
        tenant_key: &str,
        max: u32,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Result<SlotRef, StartRefused>, StoreError> {
        let held = self.slots(tenant_key).await?;
        if let Some(mine) = held.iter().find(|s| s.holder == run.id.to_string()) {
            // The run holds a slot already (a run handed over to its next invocation): it goes
            // on in it, still only if it is in `from`.
            let slot = SlotRef { tenant_key: tenant_key.to_owned(), index: mine.index };
            return self.try_start(run, from, &slot, now, lease_until).await;
        }
        let free = slots::free(max, &held, now);
        for index in free {
            let slot = SlotRef { tenant_key: tenant_key.to_owned(), index };
            match self.try_start(run, from, &slot, now, lease_until).await? {
                Err(StartRefused::NoSlot) => continue,
                other => return Ok(other),
            }
        }
        Ok(Err(StartRefused::NoSlot))
    }

    async fn try_start(
        &self,
        run: &AgentRun,
        from: RunStatus,
        slot: &SlotRef,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Result<SlotRef, StartRefused>, StoreError> {
        // A cancelled run does not start; one that is running already (handed over) goes on,
        // so that its turn sees the cancel and ends.
        // The run carries the slot's lease, and is filed under it in the due-work index.
        let mut update = Update::builder()
            .table_name(self.table())
            .key("PK", s(project_pk(&run.project_id)))
            .key("SK", s(run_sk(&run.id)))
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":from", s(from.as_str()))
            .expression_attribute_values(":running", s(RunStatus::Running.as_str()))
            .expression_attribute_values(":lease", attr(lease_until)?)
            .expression_attribute_values(":lease_pk", s(RUNS_LEASE))
            .expression_attribute_values(":lease_sk", s(due_sk(lease_until, run)));
        update = if from == RunStatus::Running {
            update.condition_expression("#status = :from")
        } else {
            update
                .condition_expression("#status = :from AND cancel_requested = :no")
                .expression_attribute_values(":no", AttributeValue::Bool(false))
        };
        const LEASED: &str = "lease_until = :lease, GSI2PK = :lease_pk, GSI2SK = :lease_sk";
        update = if run.started_at.is_none() {
            update
                .update_expression(format!("SET #status = :running, started_at = :now, {LEASED}"))
                .expression_attribute_values(":now", attr(now)?)
        } else {
            update.update_expression(format!("SET #status = :running, {LEASED}"))
        };
        let items = vec![
            TransactWriteItem::builder().put(self.slot_put(slot, &run.id, now, lease_until)?).build(),
            TransactWriteItem::builder().update(update.build().map_err(StoreError::unavailable)?).build(),
        ];
        match self.store.dynamo.transact_write_items().set_transact_items(Some(items)).send().await {
            Ok(_) => Ok(Ok(slot.clone())),
            Err(err) => {
                let reasons: Vec<Option<String>> = err
                    .as_service_error()
                    .and_then(|e| match e {
                        aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(c) => {
                            Some(c.cancellation_reasons().iter().map(|r| r.code().map(str::to_owned)).collect())
                        }
                        _ => None,
                    })
                    .unwrap_or_default();
                let failed =
                    |i: usize| reasons.get(i).and_then(|r| r.as_deref()) == Some("ConditionalCheckFailed");
                if failed(1) {
                    Ok(Err(StartRefused::NotStartable))
                } else if failed(0) {
                    Ok(Err(StartRefused::NoSlot))
                } else {
                    Err(transaction_conflict(err))
                }
            }
        }
    }

    /// Renews the run's hold on its slot and the run's own lease (the executor does, while the
    /// turn goes on), in one transaction. `Conflict`: the slot is another's now, or the run is
    /// not running any more (ended, or settled by the sweep after its lease lapsed).
    pub async fn renew(
        &self,
        slot: &SlotRef,
        run: &AgentRun,
        lease_until: Timestamp,
    ) -> Result<(), StoreError> {
        let slot_update = slots::renew(self.store, &place(slot), &run.id.to_string(), lease_until, None)?;
        let run_update = Update::builder()
            .table_name(self.table())
            .key("PK", s(project_pk(&run.project_id)))
            .key("SK", s(run_sk(&run.id)))
            .condition_expression("#status = :running")
            // The partition too: a run that started before leases moves under its lease here.
            .update_expression("SET lease_until = :lease, GSI2PK = :lease_pk, GSI2SK = :lease_sk")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":running", s(RunStatus::Running.as_str()))
            .expression_attribute_values(":lease", attr(lease_until)?)
            .expression_attribute_values(":lease_pk", s(RUNS_LEASE))
            .expression_attribute_values(":lease_sk", s(due_sk(lease_until, run)))
            .build()
            .map_err(StoreError::unavailable)?;
        self.store
            .dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(slot_update).build())
            .transact_items(TransactWriteItem::builder().update(run_update).build())
            .send()
            .await
            .map_err(transaction_conflict)?;
        Ok(())
    }

    /// Records how the run's turn stopped (`running` → the outcome's status) and gives its slot
    /// back, in one transaction, with the event announcing it and the callback's message.
    /// `Conflict`: the run was not running (another writer ended it).
    pub async fn settle(
        &self,
        run: &AgentRun,
        slot: Option<&SlotRef>,
        outcome: &RunOutcome,
        announce: Announce<'_>,
        now: Timestamp,
    ) -> Result<AgentRun, StoreError> {
        self.settle_if(run, slot, outcome, announce, now, None).await
    }

    /// Settles a running run whose lease lapsed at `now` (its executor died), as
    /// [`AgentRuns::settle`] does but keeping its slot as it is (its lapsed lease frees it).
    /// `Conflict`: the run is not running, or its lease was renewed meanwhile.
    pub async fn settle_lapsed(
        &self,
        run: &AgentRun,
        outcome: &RunOutcome,
        announce: Announce<'_>,
        now: Timestamp,
    ) -> Result<AgentRun, StoreError> {
        self.settle_if(run, None, outcome, announce, now, Some(now)).await
    }

    async fn settle_if(
        &self,
        run: &AgentRun,
        slot: Option<&SlotRef>,
        outcome: &RunOutcome,
        announce: Announce<'_>,
        now: Timestamp,
        lapsed_at: Option<Timestamp>,
    ) -> Result<AgentRun, StoreError> {
        let (project, id) = (&run.project_id, &run.id);
        // Off the lease partition, back under its retention.
        let mut sets = vec![
            "#status = :to",
            "#usage = :usage",
            "cost_usd = :cost",
            "pending_action_ids = :pending",
            "GSI2PK = :expire_pk",
            "GSI2SK = :expire_sk",
        ];
        let mut update = Update::builder()
            .table_name(self.table())
            .key("PK", s(project_pk(project)))
            .key("SK", s(run_sk(id)))
            .expression_attribute_values(":expire_pk", s(RUNS_EXPIRE))
            .expression_attribute_values(":expire_sk", s(due_sk(run.expires_at, run)))
            .expression_attribute_names("#status", "status")
            .expression_attribute_names("#usage", "usage")
            .expression_attribute_values(":running", s(RunStatus::Running.as_str()))
            .expression_attribute_values(":to", s(outcome.status.as_str()))
            .expression_attribute_values(":usage", attr(outcome.usage)?)
            .expression_attribute_values(":cost", AttributeValue::N(format!("{:.9}", outcome.cost_usd)))
            .expression_attribute_values(":pending", attr(&outcome.pending_action_ids)?);
        update = match lapsed_at {
            None => update.condition_expression("#status = :running"),
            Some(at) => update
                .condition_expression("#status = :running AND lease_until < :lapsed")
                .expression_attribute_values(":lapsed", attr(at)?),
        };
        if let Some(reason) = outcome.stop_reason {
            sets.push("stop_reason = :reason");
            update = update.expression_attribute_values(":reason", attr(reason)?);
        }
        if let Some(text) = &outcome.output_text {
            sets.push("output_text = :text");
            update = update.expression_attribute_values(":text", s(text.clone()));
        }
        if let Some(error) = &outcome.error {
            sets.push("#error = :error");
            update = update
                .expression_attribute_names("#error", "error")
                .expression_attribute_values(":error", attr(error)?);
        }
        if outcome.status.is_terminal() {
            sets.push("ended_at = :now");
            update = update.expression_attribute_values(":now", attr(now)?);
        }
        // The end is recorded for the run's callback in the same write.
        if let Some(callback) = &outcome.callback {
            sets.push("callback = :callback");
            update = update.expression_attribute_values(":callback", attr(callback)?);
        }
        let update = update
            .update_expression(format!("SET {} REMOVE lease_until", sets.join(", ")))
            .build()
            .map_err(StoreError::unavailable)?;
        let mut items = vec![TransactWriteItem::builder().update(update).build()];
        if let Some(slot) = slot {
            items.push(self.slot_release(slot, id)?);
        }
        if let Some(event) = announce.event {
            items.push(self.store.webhooks().emit_item(event)?);
        }
        // The callback's signed message, written if and only if the end is.
        if let Some(message) = announce.callback {
            items.extend(self.store.webhooks().message_items(message)?);
        }
        self.store
            .dynamo
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map_err(transaction_conflict)?;
        self.get(project, id).await
    }

    /// Moves a run that is not running from `from` to `to` (a cancel of a queued or waiting
    /// run), with the event announcing it, in one transaction. `Conflict` when it is not in
    /// `from` any more.
    pub async fn transition(
        &self,
        project: &ProjectId,
        id: &RunId,
        from: RunStatus,
        to: RunStatus,
        emit: Option<&OutboxEvent>,
        now: Timestamp,
    ) -> Result<AgentRun, StoreError> {
        let mut expression = "SET #status = :to".to_owned();
        if to.is_terminal() {
            expression.push_str(", ended_at = :now");
        }
        let mut update = Update::builder()
            .table_name(self.table())
            .key("PK", s(project_pk(project)))
            .key("SK", s(run_sk(id)))
            .condition_expression("#status = :from")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":from", s(from.as_str()))
            .expression_attribute_values(":to", s(to.as_str()))
            .update_expression(expression);
        if to.is_terminal() {
            update = update.expression_attribute_values(":now", attr(now)?);
        }
        let mut items = vec![
            TransactWriteItem::builder().update(update.build().map_err(StoreError::unavailable)?).build(),
        ];
        if let Some(event) = emit {
            items.push(self.store.webhooks().emit_item(event)?);
        }
        self.store
            .dynamo
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map_err(transaction_conflict)?;
        self.get(project, id).await
    }

    /// Records a cancel of a running run: its turn stops at the next safe point. `Conflict`
    /// when the run is not running.
    pub async fn request_cancel(&self, project: &ProjectId, id: &RunId) -> Result<AgentRun, StoreError> {
        let out = self
            .store
            .dynamo
            .update_item()
            .table_name(self.table())
            .key("PK", s(project_pk(project)))
            .key("SK", s(run_sk(id)))
            .condition_expression("#status = :running")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":running", s(RunStatus::Running.as_str()))
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .update_expression("SET cancel_requested = :yes")
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        let item: RunItem = serde_dynamo::from_item(
            out.attributes.ok_or_else(|| StoreError::Corrupt("update returned no run".into()))?,
        )?;
        Ok(item.run)
    }
}
