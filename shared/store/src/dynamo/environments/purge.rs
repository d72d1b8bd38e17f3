//! A deleted environment: marked, found by the retention sweep, and purged.

use super::*;

impl Environments<'_> {
    /// Marks the environment deleted at `now` (out of the project's list, into the purge's
    /// due-work index). `Ok(false)` when it already was (a retried delete changes nothing);
    /// `NotFound` when there is no such environment.
    pub async fn mark_deleted(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        // Lost to the count backfill counting it meanwhile: read again (a few times).
        for _ in 0..3 {
            let item: EnvironmentItem =
                get_as(self.store, &self.store.names.main_table, project_pk(project), environment_sk(id))
                    .await?
                    .ok_or(StoreError::NotFound)?;
            if item.environment.deleted_at.is_some() {
                return Ok(false);
            }
            // Counted as read, so the place given back (or not) is the one taken.
            let counted_as =
                if item.counted { "attribute_exists(counted)" } else { "attribute_not_exists(counted)" };
            let mark = aws_sdk_dynamodb::types::Update::builder()
                .table_name(&self.store.names.main_table)
                .key("PK", s(project_pk(project)))
                .key("SK", s(environment_sk(id)))
                .update_expression("SET deleted_at = :at, GSI2PK = :due, GSI2SK = :key REMOVE GSI1PK, GSI1SK")
                .condition_expression(format!(
                    "attribute_exists(PK) AND attribute_not_exists(deleted_at) AND {counted_as}"
                ))
                .expression_attribute_values(":at", serde_dynamo::to_attribute_value(now)?)
                .expression_attribute_values(":due", s(PURGE_PARTITION))
                .expression_attribute_values(":key", s(purge_key(now, project, id)))
                .build()
                .map_err(StoreError::unavailable)?;
            // The mark and, for a counted environment, its place given back: one transaction,
            // so two concurrent deletes give back one place.
            let mut tx = self
                .store
                .dynamo
                .transact_write_items()
                .transact_items(TransactWriteItem::builder().update(mark).build());
            if item.counted {
                tx = tx.transact_items(crate::dynamo::counted::uncount(
                    self.store,
                    &environment_counter(project),
                )?);
            }
            match crate::dynamo::counted::send(tx).await {
                Ok(()) => return Ok(true),
                // Deleted concurrently, counted meanwhile, or gone: read again to say which.
                Err(StoreError::Conflict) => continue,
                Err(err) => return Err(err),
            }
        }
        Err(StoreError::Conflict)
    }

    /// Up to `limit` deleted environments waiting for their purge, deleted at or before `now`,
    /// the oldest first.
    pub async fn deleted(&self, now: Timestamp, limit: usize) -> Result<Vec<Environment>, StoreError> {
        let until = format!("{:015}$", now.unix_millis().max(0));
        let items: Vec<EnvironmentItem> =
            crate::dynamo::due_page(self.store, &self.store.names.main_table, PURGE_PARTITION, until, limit)
                .await?;
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
        let links: Vec<LinkItem> = crate::dynamo::query_all(query).await?;
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
        crate::dynamo::batch_write(self.store, table, requests).await?;
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
        let found: Vec<IdOnly> = crate::dynamo::query_all(environments).await?;
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
        let runs: Vec<RunEnvironment> = crate::dynamo::query_all(runs).await?;
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
