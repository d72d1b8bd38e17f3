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

use agentplane_domain::page::{Page, PageRequest, created_sort_key};
use agentplane_domain::platform::{Environment, ExecutionLease};
use agentplane_domain::sandbox::SandboxId;
use agentplane_domain::session::Session;
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use aws_sdk_dynamodb::types::{ConditionCheck, Put, TransactWriteItem};
use serde::{Deserialize, Serialize};

use super::keys::project_pk;
use super::page::{query_created, start_key};
use super::{conditional, get_as, get_item, put_new, s};
use crate::{Store, StoreError};

pub(crate) fn environment_sk(id: &EnvironmentId) -> String {
    format!("ENV#{id}")
}
fn environments_list(project: &ProjectId) -> String {
    format!("PROJECT#{project}#ENVS")
}
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
    #[serde(rename = "GSI1PK")]
    gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
    #[serde(flatten)]
    pub(crate) environment: Environment,
}

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

    pub async fn create(&self, environment: &Environment) -> Result<(), StoreError> {
        let item = EnvironmentItem {
            pk: project_pk(&environment.project_id),
            sk: environment_sk(&environment.id),
            gsi1pk: environments_list(&environment.project_id),
            gsi1sk: created_sort_key(environment.created_at, &environment.id),
            environment: environment.clone(),
        };
        put_new(self.store, &self.store.names.main_table, item).await
    }

    /// An environment of `project`; another project's is `NotFound`.
    pub async fn get(&self, project: &ProjectId, id: &EnvironmentId) -> Result<Environment, StoreError> {
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
        let start = match after {
            Some(id) => {
                let item = get_item(
                    self.store,
                    &self.store.names.main_table,
                    project_pk(project),
                    environment_sk(id),
                )
                .await?
                .ok_or(StoreError::NotFound)?;
                Some(start_key(&item).ok_or(StoreError::NotFound)?)
            }
            None => None,
        };
        let page: Page<EnvironmentItem> =
            query_created(self.store, &environments_list(project), start, page.limit, page.order).await?;
        Ok(Page { items: page.items.into_iter().map(|i| i.environment).collect(), has_more: page.has_more })
    }

    /// Binds the environment to `sandbox` if it is still bound to `previous` (`None`: to
    /// none); `Conflict` when another binding won.
    pub async fn bind_sandbox(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        sandbox: &SandboxId,
        previous: Option<&SandboxId>,
    ) -> Result<(), StoreError> {
        let update = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(environment_sk(id)))
            .update_expression("SET sandbox_id = :new")
            .expression_attribute_values(":new", s(sandbox.as_str()));
        let update = match previous {
            Some(old) => update
                .condition_expression("attribute_exists(PK) AND sandbox_id = :old")
                .expression_attribute_values(":old", s(old.as_str())),
            None => update.condition_expression("attribute_exists(PK) AND attribute_not_exists(sandbox_id)"),
        };
        update.send().await.map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    /// Records the environment's initial checkpoint (the first one wins; later calls change
    /// nothing).
    pub async fn set_initial_checkpoint(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        manifest: &str,
    ) -> Result<(), StoreError> {
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(environment_sk(id)))
            .update_expression("SET initial_checkpoint = :m")
            .condition_expression("attribute_exists(PK) AND attribute_not_exists(initial_checkpoint)")
            .expression_attribute_values(":m", s(manifest))
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()));
        match result {
            Ok(_) | Err(StoreError::Conflict) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Marks a rollback under way (`Conflict` when one already is, or the environment's Runs
    /// moved past `rollback.through_sequence` meanwhile: read again).
    pub async fn begin_rollback(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        rollback: &agentplane_domain::platform::ActiveRollback,
    ) -> Result<(), StoreError> {
        self.store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(environment_sk(id)))
            .update_expression("SET #rb = :rb")
            .condition_expression("attribute_exists(PK) AND attribute_not_exists(#rb) AND run_count = :count")
            .expression_attribute_names("#rb", "rollback")
            .expression_attribute_values(":rb", serde_dynamo::to_attribute_value(rollback)?)
            .expression_attribute_values(
                ":count",
                aws_sdk_dynamodb::types::AttributeValue::N(rollback.through_sequence.to_string()),
            )
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    /// Ends the rollback of `run` (if it is still the one under way).
    pub async fn end_rollback(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        run: &agentplane_domain::platform::run::RunId,
    ) -> Result<(), StoreError> {
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(environment_sk(id)))
            .update_expression("REMOVE #rb")
            .condition_expression("attribute_exists(PK) AND #rb.run_id = :run")
            .expression_attribute_names("#rb", "rollback")
            .expression_attribute_values(":run", s(run.to_string()))
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()));
        match result {
            Ok(_) | Err(StoreError::Conflict) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Claims the environment's execution lease for `run` (sequence `sequence`), as `read` (the
    /// environment as the caller read it) allows: no rollback under way, no live lease of another
    /// Run, and no claim since `read` (its `fence` unchanged). The lease's token is the next
    /// fence; `settled_through` becomes `settled` (every earlier Run has ended). `Conflict`: read
    /// again.
    pub async fn claim_execution(
        &self,
        read: &Environment,
        run: &agentplane_domain::platform::run::RunId,
        sequence: u64,
        settled: u64,
        now: Timestamp,
        until: Timestamp,
    ) -> Result<ExecutionLease, StoreError> {
        let lease = ExecutionLease { run_id: *run, sequence, token: read.fence + 1, until };
        self.store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(&read.project_id)))
            .key("SK", s(environment_sk(&read.id)))
            .update_expression("SET #ex = :lease, fence = :token, settled_through = :settled")
            .condition_expression(
                "attribute_exists(PK) AND attribute_not_exists(#rb) \
                 AND (attribute_not_exists(fence) OR fence = :fence) \
                 AND (attribute_not_exists(#ex) OR #ex.#until < :now OR #ex.run_id = :run)",
            )
            .expression_attribute_names("#rb", "rollback")
            .expression_attribute_names("#ex", "executing")
            .expression_attribute_names("#until", "until")
            .expression_attribute_values(":lease", serde_dynamo::to_attribute_value(&lease)?)
            .expression_attribute_values(":token", n(lease.token))
            .expression_attribute_values(":fence", n(read.fence))
            .expression_attribute_values(":settled", n(settled.max(read.settled_through)))
            .expression_attribute_values(":now", n(now.unix_millis()))
            .expression_attribute_values(":run", s(run.to_string()))
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(lease)
    }

    /// Extends the lease to `until` while it is still `lease` (no later claim): `Conflict` when
    /// it was lost (taken over, or released by a rollback's end).
    pub async fn renew_execution(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        lease: &ExecutionLease,
        until: Timestamp,
    ) -> Result<(), StoreError> {
        self.store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(environment_sk(id)))
            .update_expression("SET #ex.#until = :until")
            .condition_expression("attribute_exists(#ex) AND fence = :token AND #ex.run_id = :run")
            .expression_attribute_names("#ex", "executing")
            .expression_attribute_names("#until", "until")
            .expression_attribute_values(":until", n(until.unix_millis()))
            .expression_attribute_values(":token", n(lease.token))
            .expression_attribute_values(":run", s(lease.run_id.to_string()))
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    /// Gives the lease back (if it is still `lease`; a lost one is left as it is).
    pub async fn release_execution(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        lease: &ExecutionLease,
    ) -> Result<(), StoreError> {
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(environment_sk(id)))
            .update_expression("REMOVE #ex")
            .condition_expression("attribute_exists(#ex) AND fence = :token")
            .expression_attribute_names("#ex", "executing")
            .expression_attribute_values(":token", n(lease.token))
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()));
        match result {
            Ok(_) | Err(StoreError::Conflict) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Creates `session` in its environment (`session.environment_id`): the session, its
    /// locator and its link in one transaction, under the condition that the environment
    /// exists in the session's project (`NotFound` otherwise).
    pub async fn create_session(&self, session: &Session) -> Result<(), StoreError> {
        let environment = session.environment_id.ok_or(StoreError::NotFound)?;
        let table = &self.store.names.main_table;
        let check = ConditionCheck::builder()
            .table_name(table)
            .key("PK", s(project_pk(&session.project_id)))
            .key("SK", s(environment_sk(&environment)))
            .condition_expression("attribute_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)?;
        let link = LinkItem {
            pk: project_pk(&session.project_id),
            sk: link_sk(&environment, &session.id),
            gsi1pk: links_list(&session.project_id, &environment),
            gsi1sk: created_sort_key(session.created_at, &session.id),
            session_id: session.id,
            created_at: session.created_at,
        };
        let put = Put::builder()
            .table_name(table)
            .set_item(Some(serde_dynamo::to_item(link)?))
            .condition_expression("attribute_not_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)?;
        let extra = vec![
            TransactWriteItem::builder().condition_check(check).build(),
            TransactWriteItem::builder().put(put).build(),
        ];
        match self.store.sessions().create_with(session, extra).await {
            // The session id is fresh: a failed condition is the environment's.
            Err(StoreError::Conflict) => Err(StoreError::NotFound),
            other => other,
        }
    }

    /// A page of the environment's live sessions (a deleted one is left out of its page). An
    /// `after` naming no session of this environment is `NotFound`.
    pub async fn list_sessions(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        page: &PageRequest,
        after: Option<&SessionId>,
    ) -> Result<Page<Session>, StoreError> {
        let table = &self.store.names.main_table;
        let start = match after {
            Some(id) => {
                let item = get_item(self.store, table, project_pk(project), link_sk(environment, id))
                    .await?
                    .ok_or(StoreError::NotFound)?;
                Some(start_key(&item).ok_or(StoreError::NotFound)?)
            }
            None => None,
        };
        let links: Page<LinkItem> =
            query_created(self.store, &links_list(project, environment), start, page.limit, page.order)
                .await?;
        let ids: Vec<(ProjectId, SessionId)> = links.items.iter().map(|l| (*project, l.session_id)).collect();
        let mut found = self.store.sessions().get_many(&ids).await?;
        let items = links.items.iter().filter_map(|l| found.remove(&l.session_id)).collect();
        Ok(Page { items, has_more: links.has_more })
    }
}

fn n(value: impl std::fmt::Display) -> aws_sdk_dynamodb::types::AttributeValue {
    aws_sdk_dynamodb::types::AttributeValue::N(value.to_string())
}
