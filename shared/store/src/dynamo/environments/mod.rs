//! Platform environments and the links of their sessions.
//!
//! | item         | PK              | SK                          | GSI1PK (by_created)                 | GSI1SK      |
//! |--------------|-----------------|-----------------------------|-------------------------------------|-------------|
//! | environment  | `PROJECT#{pid}` | `ENV#{eid}`                 | `PROJECT#{pid}#ENVS`                | created#eid |
//! | session link | `PROJECT#{pid}` | `ENV#{eid}#SESSION#{sid}`   | `PROJECT#{pid}#ENV#{eid}#SESSIONS`  | created#sid |
//!
//! A session of an environment is the ordinary session item (its `environment_id` set); the
//! link, written in the same transaction as the session under the condition that the
//! environment exists, makes the environment's sessions one keyset list. The environment item
//! holds `run_count`, the last `environmentSequence` handed out.
//!
//! A deleted environment keeps its item until the retention sweep has purged it: `deleted_at`
//! set, out of the project's list (its GSI1 keys removed) and in the due-work index instead
//! (GSI2PK `ENVIRONMENTS_PURGE`, GSI2SK `{deleted ms:015}#{pid}#{eid}`). [`Environments::get`]
//! answers `NotFound` for it, and nothing new (a session, a Run, a sandbox binding) is written
//! under it.

use agentplane_domain::page::{Page, PageRequest, created_sort_key};
use agentplane_domain::platform::{Environment, ExecutionLease};
use agentplane_domain::sandbox::SandboxId;
use agentplane_domain::session::Session;
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{ConditionCheck, Put, TransactWriteItem};
use serde::{Deserialize, Serialize};

use super::keys::project_pk;
use super::page::created_after;
use super::{conditional, get_as, get_item, s};
use crate::{Store, StoreError};

mod execution;
mod purge;
mod rollback;
mod sessions;

pub(crate) fn environment_sk(id: &EnvironmentId) -> String {
    format!("ENV#{id}")
}
fn environments_list(project: &ProjectId) -> String {
    format!("PROJECT#{project}#ENVS")
}
/// The due-work partition of deleted environments waiting for their purge.
const PURGE_PARTITION: &str = "ENVIRONMENTS_PURGE";
fn purge_key(at: Timestamp, project: &ProjectId, id: &EnvironmentId) -> String {
    format!("{:015}#{project}#{id}", at.unix_millis().max(0))
}
/// How long after a state change that needs a message the outbox sweep looks whether it was
/// acted on (the message is sent at once; this is the net under a send that failed).
const OUTBOX_GRACE_MS: i64 = 60_000;
pub(crate) fn outbox_due_from(at: Timestamp) -> Timestamp {
    at.plus_millis(OUTBOX_GRACE_MS)
}
/// The due-work partition of environments with Platform work whose message may still have to
/// be sent (the outbox: written with the state change that needs the message).
pub(crate) const OUTBOX_PARTITION: &str = "ENVIRONMENTS_OUTBOX";
/// The outbox sort key of an environment due at `at`.
pub(crate) fn outbox_key(at: Timestamp, project: &ProjectId, id: &EnvironmentId) -> String {
    format!("{:015}#{project}#{id}", at.unix_millis().max(0))
}
/// The update clause (with the values `:outbox`, `:outbox_due`) that puts an environment in the
/// outbox unless it is there already (the earliest due time is kept).
pub(crate) const OUTBOX_SET: &str =
    "GSI2PK = if_not_exists(GSI2PK, :outbox), GSI2SK = if_not_exists(GSI2SK, :outbox_due)";
fn link_sk(environment: &EnvironmentId, session: &SessionId) -> String {
    format!("ENV#{environment}#SESSION#{session}")
}
fn links_list(project: &ProjectId, environment: &EnvironmentId) -> String {
    format!("PROJECT#{project}#ENV#{environment}#SESSIONS")
}

#[derive(Serialize, Deserialize)]
pub(crate) struct EnvironmentItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK", default)]
    gsi1pk: String,
    #[serde(rename = "GSI1SK", default)]
    gsi1sk: String,
    /// Counted in the project's environment count (every environment made since the count
    /// exists); deleting it gives its place back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) counted: bool,
    /// The item's shape version (absent: 1). 2: it is counted (`counted`); the count backfill
    /// brings shape 1 items to 2.
    #[serde(default = "super::count_backfill::first_shape")]
    pub(crate) shape: u32,
    #[serde(flatten)]
    pub(crate) environment: Environment,
}

/// The project's count of environments not deleted (`environment_count` on
/// `PROJECT#{pid}` / `ENVS#COUNT`), moved with each create and delete so the cap holds under
/// concurrent creates.
pub(crate) fn environment_counter(project: &ProjectId) -> super::counted::Counter {
    super::counted::Counter::new(project_pk(project), COUNT_SK.to_owned(), COUNT_ATTR)
}
pub(crate) const COUNT_SK: &str = "ENVS#COUNT";
pub(crate) const COUNT_ATTR: &str = "environment_count";

#[derive(Serialize, Deserialize)]
struct LinkItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK")]
    gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
    session_id: SessionId,
    created_at: Timestamp,
}

pub struct Environments<'a> {
    store: &'a Store,
}

impl<'a> Environments<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    /// A conditional update of the environment item `(project, id)` with the expressions
    /// `build` adds: a condition that no longer holds means another writer moved the item
    /// first, which these callers take as done.
    async fn update_unless_changed(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        build: impl FnOnce(UpdateItemFluentBuilder) -> UpdateItemFluentBuilder,
    ) -> Result<(), StoreError> {
        let update = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(environment_sk(id)));
        match build(update)
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))
        {
            Ok(_) | Err(StoreError::Conflict) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Writes a new environment and counts it; `Conflict` when the project has `max` already.
    pub async fn create(&self, environment: &Environment, max: u32) -> Result<(), StoreError> {
        let item = EnvironmentItem {
            pk: project_pk(&environment.project_id),
            sk: environment_sk(&environment.id),
            gsi1pk: environments_list(&environment.project_id),
            gsi1sk: created_sort_key(environment.created_at, &environment.id),
            counted: true,
            shape: super::count_backfill::COUNTED_SHAPE,
            environment: environment.clone(),
        };
        let counter = environment_counter(&environment.project_id);
        super::counted::put(self.store, &counter, max, None, serde_dynamo::to_item(item)?).await
    }

    /// How many environments of the project are counted (not deleted).
    pub async fn count(&self, project: &ProjectId) -> Result<u32, StoreError> {
        super::counted::read(self.store, &environment_counter(project)).await
    }

    /// An environment of `project`; another project's, or a deleted one, is `NotFound`.
    pub async fn get(&self, project: &ProjectId, id: &EnvironmentId) -> Result<Environment, StoreError> {
        let environment = self.get_any(project, id).await?;
        if environment.deleted_at.is_some() {
            return Err(StoreError::NotFound);
        }
        Ok(environment)
    }

    /// An environment of `project`, a deleted one (waiting for its purge) included.
    pub async fn get_any(&self, project: &ProjectId, id: &EnvironmentId) -> Result<Environment, StoreError> {
        let item: EnvironmentItem =
            get_as(self.store, &self.store.names.main_table, project_pk(project), environment_sk(id))
                .await?
                .ok_or(StoreError::NotFound)?;
        Ok(item.environment)
    }

    /// A page of the project's environments; an `after` naming none of them is `NotFound`.
    pub async fn list(
        &self,
        project: &ProjectId,
        page: &PageRequest,
        after: Option<&EnvironmentId>,
    ) -> Result<Page<Environment>, StoreError> {
        let table = &self.store.names.main_table;
        let after = after.map(|id| async move {
            get_item(self.store, table, project_pk(project), environment_sk(id))
                .await?
                .ok_or(StoreError::NotFound)
        });
        created_after(self.store, &environments_list(project), after, page, |i: EnvironmentItem| {
            i.environment
        })
        .await
    }
}

fn n(value: impl std::fmt::Display) -> aws_sdk_dynamodb::types::AttributeValue {
    aws_sdk_dynamodb::types::AttributeValue::N(value.to_string())
}
