//! Where and under whom an environment's work runs: its sandbox binding and the execution lease
//! of the Run that holds it.

use super::*;

impl Environments<'_> {
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
}
