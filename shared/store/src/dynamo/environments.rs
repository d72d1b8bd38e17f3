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
use super::page::{query_created, start_key};
use super::{conditional, get_as, get_item, put_new, s};
use crate::{Store, StoreError};

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
                .condition_expression(
                    "attribute_exists(PK) AND attribute_not_exists(deleted_at) AND sandbox_id = :old",
                )
                .expression_attribute_values(":old", s(old.as_str())),
            None => update.condition_expression(
                "attribute_exists(PK) AND attribute_not_exists(deleted_at) AND attribute_not_exists(sandbox_id)",
            ),
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
        self.update_unless_changed(project, id, |update| {
            update
                .update_expression("SET initial_checkpoint = :m")
                .condition_expression("attribute_exists(PK) AND attribute_not_exists(initial_checkpoint)")
                .expression_attribute_values(":m", s(manifest))
        })
        .await
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
            .update_expression(format!("SET #rb = :rb, {OUTBOX_SET}"))
            .condition_expression("attribute_exists(PK) AND attribute_not_exists(#rb) AND run_count = :count")
            .expression_attribute_values(":outbox", s(OUTBOX_PARTITION))
            .expression_attribute_values(
                ":outbox_due",
                s(outbox_key(outbox_due_from(rollback.accepted_at), project, id)),
            )
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
        self.update_unless_changed(project, id, |update| {
            update
                .update_expression("REMOVE #rb")
                .condition_expression("attribute_exists(PK) AND #rb.run_id = :run")
                .expression_attribute_names("#rb", "rollback")
                .expression_attribute_values(":run", s(run.to_string()))
        })
        .await
    }

    /// Up to `limit` environments whose outbox is due at or before `now`, the oldest first.
    pub async fn outbox_due(&self, now: Timestamp, limit: usize) -> Result<Vec<Environment>, StoreError> {
        let until = format!("{:015}$", now.unix_millis().max(0));
        let items: Vec<EnvironmentItem> =
            super::due_page(self.store, &self.store.names.main_table, OUTBOX_PARTITION, until, limit).await?;
        Ok(items.into_iter().map(|i| i.environment).collect())
    }

    /// Looks at the environment's outbox again one grace after `now` (its work is still open).
    pub async fn reschedule_outbox(&self, env: &Environment, now: Timestamp) -> Result<(), StoreError> {
        let due = outbox_due_from(now);
        self.update_unless_changed(&env.project_id, &env.id, |update| {
            update
                .update_expression("SET GSI2SK = :due")
                .condition_expression("GSI2PK = :outbox")
                .expression_attribute_values(":outbox", s(OUTBOX_PARTITION))
                .expression_attribute_values(":due", s(outbox_key(due, &env.project_id, &env.id)))
        })
        .await
    }

    /// Takes the environment out of the outbox: every Run up to `env.run_count` has ended and
    /// no rollback is under way (as `env` was read; a Run created or a rollback begun since
    /// keeps it in).
    pub async fn clear_outbox(&self, env: &Environment) -> Result<(), StoreError> {
        self.update_unless_changed(&env.project_id, &env.id, |update| {
            update
                .update_expression("REMOVE GSI2PK, GSI2SK")
                .condition_expression("GSI2PK = :outbox AND run_count = :count AND attribute_not_exists(#rb)")
                .expression_attribute_names("#rb", "rollback")
                .expression_attribute_values(":outbox", s(OUTBOX_PARTITION))
                .expression_attribute_values(":count", n(env.run_count))
        })
        .await
    }

    /// Gives up the rollback of `run` (if it is still the one under way): the environment is
    /// released and records why.
    pub async fn fail_rollback(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        failure: &agentplane_domain::platform::RollbackFailure,
    ) -> Result<(), StoreError> {
        let recorded: aws_sdk_dynamodb::types::AttributeValue = serde_dynamo::to_attribute_value(failure)?;
        self.update_unless_changed(project, id, |update| {
            update
                .update_expression("REMOVE #rb SET rollback_failure = :failure")
                .condition_expression("attribute_exists(PK) AND #rb.run_id = :run")
                .expression_attribute_names("#rb", "rollback")
                .expression_attribute_values(":run", s(failure.run_id.to_string()))
                .expression_attribute_values(":failure", recorded)
        })
        .await
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
        self.update_unless_changed(project, id, |update| {
            update
                .update_expression("REMOVE #ex")
                .condition_expression("attribute_exists(#ex) AND fence = :token")
                .expression_attribute_names("#ex", "executing")
                .expression_attribute_values(":token", n(lease.token))
        })
        .await
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
            .condition_expression("attribute_exists(PK) AND attribute_not_exists(deleted_at)")
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

    /// Marks the environment deleted at `now` (out of the project's list, into the purge's
    /// due-work index). `Ok(false)` when it already was (a retried delete changes nothing);
    /// `NotFound` when there is no such environment.
    pub async fn mark_deleted(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        if self.get_any(project, id).await?.deleted_at.is_some() {
            return Ok(false);
        }
        let result = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(environment_sk(id)))
            .update_expression("SET deleted_at = :at, GSI2PK = :due, GSI2SK = :key REMOVE GSI1PK, GSI1SK")
            .condition_expression("attribute_exists(PK) AND attribute_not_exists(deleted_at)")
            .expression_attribute_values(":at", serde_dynamo::to_attribute_value(now)?)
            .expression_attribute_values(":due", s(PURGE_PARTITION))
            .expression_attribute_values(":key", s(purge_key(now, project, id)))
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()));
        match result {
            Ok(_) => Ok(true),
            // Deleted concurrently (or gone meanwhile: read again to say which).
            Err(StoreError::Conflict) => self.get_any(project, id).await.map(|_| false),
            Err(err) => Err(err),
        }
    }

    /// Up to `limit` deleted environments waiting for their purge, deleted at or before `now`,
    /// the oldest first.
    pub async fn deleted(&self, now: Timestamp, limit: usize) -> Result<Vec<Environment>, StoreError> {
        let until = format!("{:015}$", now.unix_millis().max(0));
        let items: Vec<EnvironmentItem> =
            super::due_page(self.store, &self.store.names.main_table, PURGE_PARTITION, until, limit).await?;
        Ok(items.into_iter().map(|i| i.environment).collect())
    }

    /// Records the manifests a purge collected and removes the environment's own references
    /// (`initial_checkpoint`, `rollback`), so that a scan for live references no longer sees
    /// them.
    pub async fn set_purge_manifests(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        manifests: &[String],
    ) -> Result<(), StoreError> {
        self.store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(environment_sk(id)))
            .update_expression("SET purge_manifests = :m REMOVE initial_checkpoint, #rb")
            .condition_expression("attribute_exists(PK) AND attribute_exists(deleted_at)")
            .expression_attribute_names("#rb", "rollback")
            .expression_attribute_values(":m", serde_dynamo::to_attribute_value(manifests)?)
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    /// Deletes the session links of the environment (its sessions stay: they are the client
    /// API's sessions too). Answers how many.
    pub async fn delete_links(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
    ) -> Result<usize, StoreError> {
        let table = &self.store.names.main_table;
        let query = self
            .store
            .dynamo
            .query()
            .table_name(table)
            .index_name(crate::resources::BY_CREATED)
            .key_condition_expression("GSI1PK = :p")
            .expression_attribute_values(":p", s(links_list(project, environment)));
        let links: Vec<LinkItem> = super::query_all(query).await?;
        let requests = links
            .iter()
            .map(|l| {
                let key = aws_sdk_dynamodb::types::DeleteRequest::builder()
                    .key("PK", s(l.pk.as_str()))
                    .key("SK", s(l.sk.as_str()))
                    .build()
                    .map_err(StoreError::unavailable)?;
                Ok(aws_sdk_dynamodb::types::WriteRequest::builder().delete_request(key).build())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let count = requests.len();
        super::batch_write(self.store, table, requests).await?;
        Ok(count)
    }

    /// Deletes the item of a deleted environment (the purge's last step); one not marked
    /// deleted is kept.
    pub async fn delete_purged(&self, project: &ProjectId, id: &EnvironmentId) -> Result<(), StoreError> {
        let result = self
            .store
            .dynamo
            .delete_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(environment_sk(id)))
            .condition_expression("attribute_exists(deleted_at)")
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()));
        match result {
            Ok(_) => Ok(()),
            // Gone already (a retried purge) or never deleted: either way nothing to do here.
            Err(StoreError::Conflict) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// The live environment of `project` whose checkpoint `snapshot` is: its initial checkpoint,
    /// or the end checkpoint of one of its Runs (what a fork may start from). `None`: no live
    /// environment or Run of the project returned it.
    ///
    /// Two filtered Queries of the project's partition (its environments, then its Runs): the
    /// read cost grows with the project's Runs, paid once per fork.
    pub async fn snapshot_source(
        &self,
        project: &ProjectId,
        snapshot: &str,
    ) -> Result<Option<EnvironmentId>, StoreError> {
        let table = &self.store.names.main_table;
        let environments = self
            .store
            .dynamo
            .query()
            .table_name(table)
            .key_condition_expression("PK = :pk AND begins_with(SK, :env)")
            .filter_expression("initial_checkpoint = :s AND attribute_not_exists(deleted_at)")
            .expression_attribute_values(":pk", s(project_pk(project)))
            .expression_attribute_values(":env", s("ENV#"))
            .expression_attribute_values(":s", s(snapshot))
            .projection_expression("id");
        let found: Vec<IdOnly> = super::query_all(environments).await?;
        if let Some(found) = found.into_iter().next() {
            return Ok(Some(found.id));
        }
        let runs = self
            .store
            .dynamo
            .query()
            .table_name(table)
            .key_condition_expression("PK = :pk AND begins_with(SK, :run)")
            .filter_expression("#cp.snapshot_id = :s")
            .expression_attribute_names("#cp", "checkpoint")
            .expression_attribute_values(":pk", s(project_pk(project)))
            .expression_attribute_values(":run", s("RUN#"))
            .expression_attribute_values(":s", s(snapshot))
            .projection_expression("environment_id");
        let runs: Vec<RunEnvironment> = super::query_all(runs).await?;
        for run in runs {
            match self.get(project, &run.environment_id).await {
                Ok(environment) => return Ok(Some(environment.id)),
                Err(StoreError::NotFound) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(None)
    }
}

#[derive(Deserialize)]
struct IdOnly {
    id: EnvironmentId,
}

#[derive(Deserialize)]
struct RunEnvironment {
    environment_id: EnvironmentId,
}

fn n(value: impl std::fmt::Display) -> aws_sdk_dynamodb::types::AttributeValue {
    aws_sdk_dynamodb::types::AttributeValue::N(value.to_string())
}
