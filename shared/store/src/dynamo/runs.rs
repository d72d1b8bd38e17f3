//! Platform Runs.
//!
//! | item | PK              | SK          | GSI1PK (by_created)                          | GSI1SK      | GSI2PK (by_due)            | GSI2SK   |
//! |------|-----------------|-------------|----------------------------------------------|-------------|----------------------------|----------|
//! | run  | `PROJECT#{pid}` | `RUN#{rid}` | `PROJECT#{pid}#ENV#{eid}#SESSION#{sid}#RUNS` | created#rid | `ENV#{eid}#RUNS`           | seq:016  |
//!
//! A Run is created in one transaction with the increment of its environment's `run_count`
//! (conditional on the count it read, so two creates never get one sequence number and a failed
//! create leaves no gap) and a check that its session belongs to the environment. GSI2 orders an
//! environment's Runs by `environmentSequence` across all its sessions (what a rollback walks).
//! The same transaction writes the Run's content-retention item (`run_content.rs`).
//! Every later change is conditional on the Run's `version`.

use agentplane_domain::page::{Order, Page, PageLimit, PageRequest, created_sort_key};
use agentplane_domain::platform::run::{Run, RunId};
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_domain::{ProjectId, SessionId};
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, TransactWriteItem, Update};
use serde::{Deserialize, Serialize};

use super::environments::{OUTBOX_PARTITION, OUTBOX_SET, environment_sk, outbox_due_from, outbox_key};
use super::keys::project_pk;
use super::page::{query_created, query_index, start_key};
use super::{conditional, get_as, get_item, s, transaction_conflict};
use crate::resources::BY_DUE;
use crate::{Store, StoreError};

fn run_sk(id: &RunId) -> String {
    format!("RUN#{id}")
}
fn session_runs(project: &ProjectId, environment: &EnvironmentId, session: &SessionId) -> String {
    format!("PROJECT#{project}#ENV#{environment}#SESSION#{session}#RUNS")
}
fn environment_runs(environment: &EnvironmentId) -> String {
    format!("ENV#{environment}#RUNS")
}
fn sequence_key(sequence: u64) -> String {
    format!("{sequence:016}")
}
fn link_sk(environment: &EnvironmentId, session: &SessionId) -> String {
    format!("ENV#{environment}#SESSION#{session}")
}

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
    #[serde(rename = "GSI2PK")]
    gsi2pk: String,
    #[serde(rename = "GSI2SK")]
    gsi2sk: String,
    #[serde(flatten)]
    run: Run,
}

impl RunItem {
    fn of(run: &Run) -> Self {
        Self {
            pk: project_pk(&run.project_id),
            sk: run_sk(&run.id),
            gsi1pk: session_runs(&run.project_id, &run.environment_id, &run.session_id),
            gsi1sk: created_sort_key(run.created_at, &run.id),
            gsi2pk: environment_runs(&run.environment_id),
            gsi2sk: sequence_key(run.environment_sequence),
            run: run.clone(),
        }
    }
}

pub struct Runs<'a> {
    store: &'a Store,
}

impl<'a> Runs<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    /// Creates `run` with `environment_sequence` = `previous + 1`, in one transaction with the
    /// environment's `run_count` going from `previous` to it; `Conflict` when the count moved
    /// meanwhile (read it again and retry) or the session is not the environment's.
    pub async fn create(&self, run: &Run, previous: u64) -> Result<(), StoreError> {
        let table = self.table();
        let bump = Update::builder()
            .table_name(table)
            .key("PK", s(project_pk(&run.project_id)))
            .key("SK", s(environment_sk(&run.environment_id)))
            // The environment enters the outbox in the same write: the Run's message is sent
            // after the commit, and the sweep sends it should that send fail.
            .update_expression(format!("SET run_count = :next, {OUTBOX_SET}"))
            .condition_expression(
                "attribute_exists(PK) AND attribute_not_exists(deleted_at) AND run_count = :previous",
            )
            .expression_attribute_values(":outbox", s(OUTBOX_PARTITION))
            .expression_attribute_values(
                ":outbox_due",
                s(outbox_key(outbox_due_from(run.created_at), &run.project_id, &run.environment_id)),
            )
            .expression_attribute_values(":next", AttributeValue::N(run.environment_sequence.to_string()))
            .expression_attribute_values(":previous", AttributeValue::N(previous.to_string()))
            .build()
            .map_err(StoreError::unavailable)?;
        let session = ConditionCheck::builder()
            .table_name(table)
            .key("PK", s(project_pk(&run.project_id)))
            .key("SK", s(link_sk(&run.environment_id, &run.session_id)))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)?;
        let put = Put::builder()
            .table_name(table)
            .set_item(Some(serde_dynamo::to_item(RunItem::of(run))?))
            .condition_expression("attribute_not_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)?;
        self.store
            .dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(bump).build())
            .transact_items(TransactWriteItem::builder().condition_check(session).build())
            .transact_items(TransactWriteItem::builder().put(put).build())
            .transact_items(TransactWriteItem::builder().put(self.store.run_content().put_for(run)?).build())
            .send()
            .await
            .map_err(transaction_conflict)?;
        Ok(())
    }

    /// A Run of `project`; another project's is `NotFound`.
    pub async fn get(&self, project: &ProjectId, id: &RunId) -> Result<Run, StoreError> {
        let item: RunItem = get_as(self.store, self.table(), project_pk(project), run_sk(id))
            .await?
            .ok_or(StoreError::NotFound)?;
        Ok(item.run)
    }

    /// Writes `run` (its `version` one more than `expected`) if its stored version is still
    /// `expected`; `Conflict` otherwise.
    pub async fn replace(&self, run: &Run, expected: u64) -> Result<(), StoreError> {
        self.store
            .dynamo
            .put_item()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(RunItem::of(run))?))
            .condition_expression("attribute_exists(PK) AND version = :expected")
            .expression_attribute_values(":expected", AttributeValue::N(expected.to_string()))
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    /// [`Self::replace`] with webhook events emitted in the same transaction (the change and its
    /// events are written together or not at all).
    pub async fn replace_emitting(
        &self,
        run: &Run,
        expected: u64,
        events: &[crate::OutboxEvent],
    ) -> Result<(), StoreError> {
        if events.is_empty() {
            return self.replace(run, expected).await;
        }
        let put = Put::builder()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(RunItem::of(run))?))
            .condition_expression("attribute_exists(PK) AND version = :expected")
            .expression_attribute_values(":expected", AttributeValue::N(expected.to_string()))
            .build()
            .map_err(StoreError::unavailable)?;
        let mut tx = self
            .store
            .dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put).build());
        for event in events {
            tx = tx.transact_items(self.store.webhooks().emit_item(event)?);
        }
        tx.send().await.map_err(transaction_conflict)?;
        Ok(())
    }

    /// A page of a session's Runs; an `after` naming no Run of it is `NotFound`.
    pub async fn list_session(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        session: &SessionId,
        page: &PageRequest,
        after: Option<&RunId>,
    ) -> Result<Page<Run>, StoreError> {
        let start = match after {
            Some(id) => {
                let item = get_item(self.store, self.table(), project_pk(project), run_sk(id))
                    .await?
                    .ok_or(StoreError::NotFound)?;
                let run: RunItem = serde_dynamo::from_item(item.clone())?;
                if run.run.environment_id != *environment || run.run.session_id != *session {
                    return Err(StoreError::NotFound);
                }
                Some(start_key(&item).ok_or(StoreError::NotFound)?)
            }
            None => None,
        };
        let list = session_runs(project, environment, session);
        let page: Page<RunItem> = query_created(self.store, &list, start, page.limit, page.order).await?;
        Ok(Page { items: page.items.into_iter().map(|i| i.run).collect(), has_more: page.has_more })
    }

    /// The Runs of `environment` with a sequence in `[from, through]`, in order, as the index
    /// holds them (eventually consistent: a status may lag, a new Run may be missing).
    pub async fn sequence_runs(
        &self,
        environment: &EnvironmentId,
        from: u64,
        through: u64,
    ) -> Result<Vec<Run>, StoreError> {
        let query = self
            .store
            .dynamo
            .query()
            .table_name(self.table())
            .index_name(BY_DUE)
            .key_condition_expression("GSI2PK = :p AND GSI2SK BETWEEN :a AND :b")
            .expression_attribute_values(":p", s(environment_runs(environment)))
            .expression_attribute_values(":a", s(sequence_key(from)))
            .expression_attribute_values(":b", s(sequence_key(through)));
        let items: Vec<RunItem> = super::query_all(query).await?;
        Ok(items.into_iter().map(|i| i.run).collect())
    }

    /// The ids of the environment's Runs from `from` through `through` (`environmentSequence`,
    /// ascending), from the index (eventually consistent: read each Run for its state).
    pub async fn sequence_range(
        &self,
        environment: &EnvironmentId,
        from: u64,
        through: u64,
    ) -> Result<Vec<RunId>, StoreError> {
        Ok(self.sequence_runs(environment, from, through).await?.into_iter().map(|r| r.id).collect())
    }

    /// The environment's Runs in `environmentSequence` order (at most `limit`).
    pub async fn by_sequence(
        &self,
        environment: &EnvironmentId,
        limit: PageLimit,
    ) -> Result<Page<Run>, StoreError> {
        let page: Page<RunItem> = query_index(
            self.store,
            BY_DUE,
            "GSI2PK",
            &environment_runs(environment),
            None,
            limit,
            Order::Asc,
        )
        .await?;
        Ok(Page { items: page.items.into_iter().map(|i| i.run).collect(), has_more: page.has_more })
    }

    /// Up to `limit` of the environment's Runs after `environmentSequence` `after`, in order
    /// (from the index: eventually consistent).
    pub async fn environment_page(
        &self,
        environment: &EnvironmentId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Run>, StoreError> {
        let out = self
            .store
            .dynamo
            .query()
            .table_name(self.table())
            .index_name(BY_DUE)
            .key_condition_expression("GSI2PK = :p AND GSI2SK > :after")
            .expression_attribute_values(":p", s(environment_runs(environment)))
            .expression_attribute_values(":after", s(sequence_key(after)))
            .limit(i32::try_from(limit).unwrap_or(100).max(1))
            .send()
            .await
            .map_err(StoreError::unavailable)?;
        out.items().iter().map(|item| Ok(serde_dynamo::from_item::<_, RunItem>(item.clone())?.run)).collect()
    }

    /// Deletes a Run's item (its environment's purge).
    pub async fn delete(&self, project: &ProjectId, id: &RunId) -> Result<(), StoreError> {
        self.store
            .dynamo
            .delete_item()
            .table_name(self.table())
            .key("PK", s(project_pk(project)))
            .key("SK", s(run_sk(id)))
            .send()
            .await
            .map_err(StoreError::unavailable)?;
        Ok(())
    }
}
