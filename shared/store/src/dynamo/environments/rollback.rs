//! Checkpoints and rollbacks of an environment, and the outbox that sees their messages sent.

use super::*;

impl Environments<'_> {
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
            crate::dynamo::due_page(self.store, &self.store.names.main_table, OUTBOX_PARTITION, until, limit)
                .await?;
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
}
