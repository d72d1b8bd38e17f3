//! Tenants, the projects attached to them, and each tenant's monthly spend, in the main table.
//!
//! | item          | PK                     | SK               | GSI1 (by_created)        |
//! |---------------|------------------------|------------------|--------------------------|
//! | tenant        | `TENANT#{id}`          | `TENANT`         | `TENANTS` / created#id   |
//! | monthly spend | `SPEND#{tenant key}`   | `MONTH#{yyyy-mm}`| —                        |
//!
//! A project names its tenant (`tenant_id` on the project item). The spend item is one atomic
//! counter of whole nano-dollars, added to in the same transaction as the usage of each model
//! call of the tenant's projects.

use agentplane_domain::page::{Page, PageRequest, created_sort_key};
use agentplane_domain::project::Project;
use agentplane_domain::tenant::{Tenant, TenantId};
use agentplane_domain::webhook::MAX_ENDPOINTS;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, ReturnValue, TransactWriteItem, Update};
use serde::{Deserialize, Serialize};

use super::keys::{PROJECT_SK, TENANT_SK, project_pk, tenant_pk};
use super::page::{query_created, start_key};
use super::{conditional, get_as, s, transaction_conflict};
use crate::{Store, StoreError};

pub const TENANTS_LIST: &str = "TENANTS";

pub fn spend_pk(tenant_key: &str) -> String {
    format!("SPEND#{tenant_key}")
}
pub fn spend_sk(month: &str) -> String {
    format!("MONTH#{month}")
}

#[derive(Serialize, Deserialize)]
struct TenantItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK")]
    gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
    #[serde(flatten)]
    tenant: Tenant,
}

#[derive(Deserialize)]
struct SpendItem {
    #[serde(default)]
    spent_nanos: i64,
}

pub struct Tenants<'a> {
    store: &'a Store,
}

impl<'a> Tenants<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    pub async fn create(&self, tenant: &Tenant) -> Result<(), StoreError> {
        let item = TenantItem {
            pk: tenant_pk(&tenant.id),
            sk: TENANT_SK.into(),
            gsi1pk: TENANTS_LIST.into(),
            gsi1sk: created_sort_key(tenant.created_at, &tenant.id),
            tenant: tenant.clone(),
        };
        super::put_new(self.store, self.table(), item).await
    }

    pub async fn get(&self, id: &TenantId) -> Result<Tenant, StoreError> {
        let item: Option<TenantItem> = get_as(self.store, self.table(), tenant_pk(id), TENANT_SK).await?;
        item.map(|i| i.tenant).ok_or(StoreError::NotFound)
    }

    pub async fn list(
        &self,
        page: &PageRequest,
        after: Option<&TenantId>,
    ) -> Result<Page<Tenant>, StoreError> {
        let start = match after {
            Some(id) => {
                let item = super::get_item(self.store, self.table(), tenant_pk(id), TENANT_SK)
                    .await?
                    .ok_or(StoreError::NotFound)?;
                Some(start_key(&item).ok_or(StoreError::NotFound)?)
            }
            None => None,
        };
        let page: Page<TenantItem> =
            query_created(self.store, TENANTS_LIST, start, page.limit, page.order).await?;
        Ok(Page { items: page.items.into_iter().map(|i| i.tenant).collect(), has_more: page.has_more })
    }

    /// Sets (or, with `None`, removes) the monthly spend limit. `NotFound` for no such tenant.
    pub async fn set_limit(&self, id: &TenantId, limit: Option<f64>) -> Result<Tenant, StoreError> {
        let update = self
            .store
            .dynamo
            .update_item()
            .table_name(self.table())
            .key("PK", s(tenant_pk(id)))
            .key("SK", s(TENANT_SK))
            .condition_expression("attribute_exists(PK)")
            .return_values(ReturnValue::AllNew);
        let update = match limit {
            Some(usd) => update
                .update_expression("SET monthly_spend_limit_usd = :l")
                .expression_attribute_values(":l", AttributeValue::N(format!("{usd:.9}"))),
            None => update.update_expression("REMOVE monthly_spend_limit_usd"),
        };
        let out = update
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))
            .map_err(|e| if matches!(e, StoreError::Conflict) { StoreError::NotFound } else { e })?;
        let item: TenantItem = serde_dynamo::from_item(
            out.attributes.ok_or_else(|| StoreError::Corrupt("update returned no tenant".into()))?,
        )?;
        Ok(item.tenant)
    }

    /// Attaches `project` (as read) to the tenant `id` (both must exist), in one transaction;
    /// the project's later spend and runs count against the tenant. `NotFound` when either is
    /// missing.
    ///
    /// The project's `endpoints` webhook endpoints move into the tenant's count in the same
    /// transaction (out of a tenant it leaves); the project's count is checked unchanged, so a
    /// concurrent create is never lost. `Conflict` when a condition did not hold (the project's
    /// tenant or count moved, or the endpoints do not fit under the tenant's 50): the caller
    /// reads again to tell which.
    pub async fn attach(&self, id: &TenantId, project: &Project, endpoints: u32) -> Result<(), StoreError> {
        let n = |v: u32| AttributeValue::N(v.to_string());
        let mut update = Update::builder()
            .table_name(self.table())
            .key("PK", s(project_pk(&project.id)))
            .key("SK", s(PROJECT_SK))
            .update_expression("SET tenant_id = :t")
            .expression_attribute_values(":t", s(id.to_string()));
        update = match project.tenant_id {
            Some(old) => update
                .condition_expression("tenant_id = :old")
                .expression_attribute_values(":old", s(old.to_string())),
            None => update.condition_expression("attribute_exists(PK) AND attribute_not_exists(tenant_id)"),
        };
        let mut tx = self.store.dynamo.transact_write_items().transact_items(
            TransactWriteItem::builder().update(update.build().map_err(StoreError::unavailable)?).build(),
        );
        let tenant = Update::builder()
            .table_name(self.table())
            .key("PK", s(tenant_pk(id)))
            .key("SK", s(TENANT_SK))
            .update_expression("SET endpoint_count = if_not_exists(endpoint_count, :zero) + :n")
            .condition_expression(
                "attribute_exists(PK) AND (attribute_not_exists(endpoint_count) OR endpoint_count <= :room)",
            )
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":n", n(endpoints))
            .expression_attribute_values(":room", n(MAX_ENDPOINTS.saturating_sub(endpoints)))
            .build()
            .map_err(StoreError::unavailable)?;
        tx = tx.transact_items(TransactWriteItem::builder().update(tenant).build());
        if endpoints > 0 {
            let (pk, sk) = super::webhooks::count_key(&project.id);
            let unchanged = ConditionCheck::builder()
                .table_name(self.table())
                .key("PK", s(pk))
                .key("SK", s(sk))
                .condition_expression("endpoint_count = :n")
                .expression_attribute_values(":n", n(endpoints))
                .build()
                .map_err(StoreError::unavailable)?;
            tx = tx.transact_items(TransactWriteItem::builder().condition_check(unchanged).build());
            if let Some(old) = project.tenant_id {
                let leave = Update::builder()
                    .table_name(self.table())
                    .key("PK", s(tenant_pk(&old)))
                    .key("SK", s(TENANT_SK))
                    .update_expression("SET endpoint_count = endpoint_count - :n")
                    .condition_expression("endpoint_count >= :n")
                    .expression_attribute_values(":n", n(endpoints))
                    .build()
                    .map_err(StoreError::unavailable)?;
                tx = tx.transact_items(TransactWriteItem::builder().update(leave).build());
            }
        } else {
            let (pk, sk) = super::webhooks::count_key(&project.id);
            let none = ConditionCheck::builder()
                .table_name(self.table())
                .key("PK", s(pk))
                .key("SK", s(sk))
                .condition_expression("attribute_not_exists(endpoint_count) OR endpoint_count = :zero")
                .expression_attribute_values(":zero", n(0))
                .build()
                .map_err(StoreError::unavailable)?;
            tx = tx.transact_items(TransactWriteItem::builder().condition_check(none).build());
        }
        match tx.send().await.map_err(transaction_conflict) {
            // Which condition failed, the caller finds out by reading again; a missing tenant
            // or project is told apart here.
            Err(StoreError::Conflict) => {
                self.get(id).await?;
                self.store.projects().get(&project.id).await?;
                Err(StoreError::Conflict)
            }
            other => other.map(|_| ()),
        }
    }

    /// What the tenant key's projects spent in `month` (USD).
    pub async fn spent(&self, tenant_key: &str, month: &str) -> Result<f64, StoreError> {
        let item: Option<SpendItem> =
            get_as(self.store, self.table(), spend_pk(tenant_key), spend_sk(month)).await?;
        Ok(agentplane_domain::tenant::usd_of(item.map_or(0, |i| i.spent_nanos)))
    }

    /// A transaction's atomic add of `nanos` to the month's spend counter.
    pub fn add_spend(
        &self,
        tenant_key: &str,
        month: &str,
        nanos: i64,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(self.table())
            .key("PK", s(spend_pk(tenant_key)))
            .key("SK", s(spend_sk(month)))
            .update_expression("ADD spent_nanos :n")
            .expression_attribute_values(":n", AttributeValue::N(nanos.to_string()))
            .build()
            .map_err(StoreError::unavailable)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }
}
