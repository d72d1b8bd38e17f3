//! Endpoints: created and deleted with their owner's counts, read, listed and replaced.

use super::*;

impl Webhooks<'_> {
    /// Writes a new endpoint and counts it; `Conflict` when its tenant (or its lone project)
    /// has [`MAX_ENDPOINTS`] already, `NotFound` when its owner does not exist.
    pub async fn create(&self, endpoint: &Endpoint) -> Result<(), StoreError> {
        self.create_capped(endpoint, MAX_ENDPOINTS).await
    }

    /// [`Self::create`], a project's own count capped at `max_per_project` as well (its tenant's
    /// stays at [`MAX_ENDPOINTS`]).
    pub async fn create_capped(&self, endpoint: &Endpoint, max_per_project: u32) -> Result<(), StoreError> {
        for _ in 0..3 {
            let (counters, guard) = self.counters_of(&endpoint.owner).await?;
            let item = serde_dynamo::to_item(EndpointItem::of(endpoint))?;
            let project_max = max_per_project.min(MAX_ENDPOINTS);
            let counts: Vec<crate::dynamo::counted::Counted<'_>> = counters
                .iter()
                .enumerate()
                .map(|(i, counter)| {
                    // A project's own count comes first.
                    let max = match endpoint.owner {
                        Owner::Project(_) if i == 0 => project_max,
                        _ => MAX_ENDPOINTS,
                    };
                    crate::dynamo::counted::Counted { counter, max: Some(max) }
                })
                .collect();
            match crate::dynamo::counted::put_counted(
                self.store,
                &counts,
                guard.item.into_iter().collect(),
                None,
                item,
            )
            .await
            {
                // The cap, or the project moved to another tenant meanwhile: which one, the
                // project says.
                Err(StoreError::Conflict) if self.moved(&guard.tenant_of, &endpoint.owner).await? => continue,
                other => return other,
            }
        }
        Err(StoreError::Conflict)
    }

    /// The counts an endpoint of `owner` takes, and the guard that the owner is as read (a
    /// project still of the same tenant, a tenant still there).
    async fn counters_of(
        &self,
        owner: &Owner,
    ) -> Result<(Vec<crate::dynamo::counted::Counter>, Guard), StoreError> {
        match owner {
            Owner::Project(project) => {
                let tenant = self.store.projects().get(project).await?.tenant_id;
                let check = ConditionCheck::builder()
                    .table_name(self.table())
                    .key("PK", s(project_pk(project)))
                    .key("SK", s(PROJECT_SK));
                let check = match tenant {
                    Some(t) => check
                        .condition_expression("tenant_id = :t")
                        .expression_attribute_values(":t", s(t.to_string())),
                    None => {
                        check.condition_expression("attribute_exists(PK) AND attribute_not_exists(tenant_id)")
                    }
                };
                let mut counters = vec![counter(project)];
                counters.extend(tenant.map(|t| tenant_counter(&t, false)));
                let check = check.build().map_err(StoreError::unavailable)?;
                let item = TransactWriteItem::builder().condition_check(check).build();
                Ok((counters, Guard { item: Some(item), tenant_of: Some(tenant) }))
            }
            // The tenant's count lives on its item, which must exist: that is the guard.
            Owner::Tenant(tenant) => {
                Ok((vec![tenant_counter(tenant, true)], Guard { item: None, tenant_of: None }))
            }
        }
    }

    /// Whether `owner` (a project) is now of another tenant than `read` said.
    async fn moved(&self, read: &Option<Option<TenantId>>, owner: &Owner) -> Result<bool, StoreError> {
        match (owner, read) {
            (Owner::Project(project), Some(was)) => match self.store.projects().get(project).await {
                Ok(now) => Ok(now.tenant_id != *was),
                Err(StoreError::NotFound) => Err(StoreError::NotFound),
                Err(err) => Err(err),
            },
            _ => Ok(false),
        }
    }

    async fn raw(&self, owner: &Owner, id: &EndpointId) -> Result<Item, StoreError> {
        crate::dynamo::get_item(self.store, self.table(), owner_pk(owner), endpoint_sk(id))
            .await?
            .ok_or(StoreError::NotFound)
    }

    pub async fn get(&self, owner: &Owner, id: &EndpointId) -> Result<Endpoint, StoreError> {
        let item: EndpointItem = serde_dynamo::from_item(self.raw(owner, id).await?)?;
        Ok(item.endpoint)
    }

    /// Every endpoint of the owner (at most [`MAX_ENDPOINTS`]), oldest first.
    pub async fn all(&self, owner: &Owner) -> Result<Vec<Endpoint>, StoreError> {
        let items: Vec<EndpointItem> = crate::dynamo::query_all(
            self.store
                .dynamo
                .query()
                .table_name(self.table())
                .index_name(crate::resources::BY_CREATED)
                .key_condition_expression("GSI1PK = :list")
                .expression_attribute_values(":list", s(endpoints_list(owner))),
        )
        .await?;
        Ok(items.into_iter().map(|i| i.endpoint).collect())
    }

    /// Every endpoint that receives the events of `project`: its own, and its tenant's.
    pub async fn receiving(&self, project: &ProjectId) -> Result<Vec<Endpoint>, StoreError> {
        let tenant = match self.store.projects().get(project).await {
            Ok(p) => p.tenant_id,
            Err(StoreError::NotFound) => None,
            Err(err) => return Err(err),
        };
        let mut endpoints = self.all(&Owner::Project(*project)).await?;
        if let Some(t) = tenant {
            endpoints.extend(self.all(&Owner::Tenant(t)).await?);
        }
        endpoints.retain(|e| e.owner.covers(*project, tenant));
        Ok(endpoints)
    }

    /// How many endpoints of its own the project has (the count item).
    pub async fn count(&self, project: &ProjectId) -> Result<u32, StoreError> {
        crate::dynamo::counted::read(self.store, &counter(project)).await
    }

    /// Whether any endpoint receives the events of `project` (its own, or its tenant's).
    pub async fn any_receiving(&self, project: &ProjectId) -> Result<bool, StoreError> {
        if self.count(project).await? > 0 {
            return Ok(true);
        }
        match self.store.projects().get(project).await?.tenant_id {
            Some(t) => Ok(self.store.tenants().get(&t).await?.tenant_endpoint_count > 0),
            None => Ok(false),
        }
    }

    pub async fn list(
        &self,
        owner: &Owner,
        page: &PageRequest,
        after: Option<&EndpointId>,
    ) -> Result<Page<Endpoint>, StoreError> {
        let after = after.map(|id| self.raw(owner, id));
        created_after(self.store, &endpoints_list(owner), after, page, |i: EndpointItem| i.endpoint).await
    }

    /// Replaces the endpoint if nobody changed it since `previous_update` (`Conflict`: re-read
    /// and re-apply; `NotFound`-like conflicts too, when it was deleted meanwhile).
    pub async fn replace(&self, endpoint: &Endpoint, previous_update: Timestamp) -> Result<(), StoreError> {
        self.store
            .dynamo
            .put_item()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(EndpointItem::of(endpoint))?))
            .condition_expression("attribute_exists(PK) AND updated_at = :prev")
            .expression_attribute_values(":prev", serde_dynamo::to_attribute_value(previous_update)?)
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    /// Deletes the endpoint and uncounts it; `NotFound` when it is not there.
    pub async fn delete(&self, owner: &Owner, id: &EndpointId) -> Result<(), StoreError> {
        for _ in 0..3 {
            let (counters, guard) = self.counters_of(owner).await?;
            let counters: Vec<&crate::dynamo::counted::Counter> = counters.iter().collect();
            match crate::dynamo::counted::delete_counted(
                self.store,
                &counters,
                guard.item.into_iter().collect(),
                None,
                owner_pk(owner),
                endpoint_sk(id),
            )
            .await
            {
                Err(StoreError::Conflict) => continue,
                other => return other,
            }
        }
        Err(StoreError::Conflict)
    }

    /// Writes the project's callback signer unless it has one already (its first secret then
    /// stays as it is); `true` when this call wrote it.
    pub async fn ensure_callback_signer(&self, signer: &Endpoint) -> Result<bool, StoreError> {
        let put = self
            .store
            .dynamo
            .put_item()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(EndpointItem::of(signer))?))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await;
        match put.map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception())) {
            Ok(_) => Ok(true),
            Err(StoreError::Conflict) => Ok(false),
            Err(err) => Err(err),
        }
    }
}
