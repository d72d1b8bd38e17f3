//! Agents and their published versions in the main table.
//!
//! | item     | PK                | SK                   | GSI1PK (by_created)        | GSI1SK     |
//! |----------|-------------------|----------------------|----------------------------|------------|
//! | agent    | `PROJECT#{pid}`   | `AGENT#{id}`         | `PROJECT#{pid}#AGENTS`     | created#id |
//! | version  | `AGENT#{id}`      | `VERSION#{n:010}`    | —                          | —          |

use agentplane_domain::agent::{Agent, AgentVersion, Channel, VersionedConfig};
use agentplane_domain::ids::AgentId;
use agentplane_domain::page::{Order, Page, PageLimit, PageRequest, created_sort_key};
use agentplane_domain::{ProjectId, Timestamp};
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use serde::{Deserialize, Serialize};

use super::keys::project_pk;
use super::page::{Item, created_after};
use super::{conditional, s, transaction_conflict};
use crate::{Store, StoreError};

fn agent_sk(id: &AgentId) -> String {
    format!("AGENT#{id}")
}
fn agents_list(project: &ProjectId) -> String {
    format!("PROJECT#{project}#AGENTS")
}
fn versions_pk(id: &AgentId) -> String {
    format!("AGENT#{id}")
}
fn version_sk(version: u32) -> String {
    format!("VERSION#{version:010}")
}

#[derive(Serialize, Deserialize)]
struct AgentItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK")]
    gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
    #[serde(flatten)]
    agent: Agent,
}

impl AgentItem {
    fn of(agent: &Agent) -> Self {
        Self {
            pk: project_pk(&agent.project_id),
            sk: agent_sk(&agent.id),
            gsi1pk: agents_list(&agent.project_id),
            gsi1sk: created_sort_key(agent.created_at, &agent.id),
            agent: agent.clone(),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct VersionItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(flatten)]
    version: AgentVersion,
}

pub use agentplane_engine::ports::sessions::TurnAgent;

pub struct Agents<'a> {
    store: &'a Store,
}

impl<'a> Agents<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    pub async fn create(&self, agent: &Agent) -> Result<(), StoreError> {
        self.store
            .dynamo
            .put_item()
            .table_name(&self.store.names.main_table)
            .set_item(Some(serde_dynamo::to_item(AgentItem::of(agent))?))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    async fn raw(&self, project: &ProjectId, id: &AgentId) -> Result<Item, StoreError> {
        super::get_item(self.store, &self.store.names.main_table, project_pk(project), agent_sk(id))
            .await?
            .ok_or(StoreError::NotFound)
    }

    pub async fn get(&self, project: &ProjectId, id: &AgentId) -> Result<Agent, StoreError> {
        let item: AgentItem = serde_dynamo::from_item(self.raw(project, id).await?)?;
        Ok(item.agent)
    }

    /// What a turn reads of its agent, in one read: the agent, the tenant of its project, and
    /// whether the project has any webhook endpoint (which decides whether its state changes
    /// emit webhook events at all).
    pub async fn get_for_turn(&self, project: &ProjectId, id: &AgentId) -> Result<TurnAgent, StoreError> {
        let table = &self.store.names.main_table;
        let agent_key = (project_pk(project), agent_sk(id));
        let project_key = (project_pk(project), super::keys::PROJECT_SK.to_owned());
        let count_key = super::webhooks::count_key(project);
        let keys = [agent_key.clone(), project_key.clone(), count_key.clone()];
        let items = super::batch_get(self.store, table, keys).await?;
        let sk = |item: &Item| item.get("SK").and_then(|v| v.as_s().ok()).cloned();
        let mut agent = None;
        let mut tenant = None;
        let mut hooks = false;
        for item in items {
            let key = sk(&item);
            if key.as_deref() == Some(agent_key.1.as_str()) {
                agent = Some(serde_dynamo::from_item::<_, AgentItem>(item)?.agent);
            } else if key.as_deref() == Some(project_key.1.as_str()) {
                tenant = serde_dynamo::from_item::<_, agentplane_domain::project::Project>(item)?.tenant_id;
            } else if key.as_deref() == Some(count_key.1.as_str()) {
                hooks = super::webhooks::counts_any(&item);
            }
        }
        Ok(TurnAgent { agent: agent.ok_or(StoreError::NotFound)?, tenant, hooks })
    }

    pub async fn list(
        &self,
        project: &ProjectId,
        page: &PageRequest,
        after: Option<&AgentId>,
    ) -> Result<Page<Agent>, StoreError> {
        let after = after.map(|id| self.raw(project, id));
        created_after(self.store, &agents_list(project), after, page, |i: AgentItem| i.agent).await
    }

    /// Replaces the agent if nobody changed it since `previous_update` (optimistic concurrency:
    /// `Conflict` tells the caller to re-read and re-apply).
    pub async fn replace(&self, agent: &Agent, previous_update: Timestamp) -> Result<(), StoreError> {
        self.store
            .dynamo
            .put_item()
            .table_name(&self.store.names.main_table)
            .set_item(Some(serde_dynamo::to_item(AgentItem::of(agent))?))
            .condition_expression("attribute_exists(PK) AND updated_at = :prev")
            .expression_attribute_values(":prev", serde_dynamo::to_attribute_value(previous_update)?)
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    /// Freezes the draft as version `latest + 1`: the version item and the agent's new
    /// `latest_version` are written in one transaction, conditional on the agent being unchanged,
    /// so two concurrent publishes never produce the same number.
    pub async fn publish(&self, agent: &Agent, now: Timestamp) -> Result<AgentVersion, StoreError> {
        let number = agent.latest_version.unwrap_or(0) + 1;
        let version = AgentVersion {
            agent_id: agent.id,
            version: number,
            config: agent.draft.clone(),
            published_at: now,
        };
        let mut updated = agent.clone();
        updated.latest_version = Some(number);
        updated.updated_at = now;
        let table = &self.store.names.main_table;
        let put_agent = Put::builder()
            .table_name(table)
            .set_item(Some(serde_dynamo::to_item(AgentItem::of(&updated))?))
            .condition_expression("attribute_exists(PK) AND updated_at = :prev")
            .expression_attribute_values(":prev", serde_dynamo::to_attribute_value(agent.updated_at)?)
            .build()
            .map_err(StoreError::unavailable)?;
        let item =
            VersionItem { pk: versions_pk(&agent.id), sk: version_sk(number), version: version.clone() };
        let put_version = Put::builder()
            .table_name(table)
            .set_item(Some(serde_dynamo::to_item(item)?))
            .condition_expression("attribute_not_exists(PK)")
            .build()
            .map_err(StoreError::unavailable)?;
        self.store
            .dynamo
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put_agent).build())
            .transact_items(TransactWriteItem::builder().put(put_version).build())
            .send()
            .await
            .map_err(transaction_conflict)?;
        Ok(version)
    }

    /// The config `agent` runs on `channel`: its draft, or a published version — `pinned`, else
    /// the newest — with its number; `None`: the agent has no published version.
    pub async fn config_of(
        &self,
        agent: &Agent,
        channel: Channel,
        pinned: Option<u32>,
    ) -> Result<Option<(VersionedConfig, Option<u32>)>, StoreError> {
        match channel {
            Channel::Draft => Ok(Some((agent.draft.clone(), None))),
            Channel::Published => match pinned.or(agent.latest_version) {
                Some(number) => Ok(Some((self.version(&agent.id, number).await?.config, Some(number)))),
                None => Ok(None),
            },
        }
    }

    pub async fn version(&self, id: &AgentId, version: u32) -> Result<AgentVersion, StoreError> {
        let item =
            super::get_item(self.store, &self.store.names.main_table, versions_pk(id), version_sk(version))
                .await?
                .ok_or(StoreError::NotFound)?;
        let item: VersionItem = serde_dynamo::from_item(item)?;
        Ok(item.version)
    }

    /// A keyset page of published versions by number: after `after` (exclusive; the caller
    /// checks that it names a version), newest first for `Desc`.
    pub async fn versions_page(
        &self,
        id: &AgentId,
        after: Option<u32>,
        limit: PageLimit,
        order: Order,
    ) -> Result<Page<AgentVersion>, StoreError> {
        let (low, high) = match (after, order) {
            (None, _) => (version_sk(0), version_sk(u32::MAX)),
            (Some(n), Order::Asc) => (version_sk(n.saturating_add(1)), version_sk(u32::MAX)),
            (Some(n), Order::Desc) => (version_sk(0), version_sk(n.saturating_sub(1))),
        };
        let query = self
            .store
            .dynamo
            .query()
            .table_name(&self.store.names.main_table)
            .key_condition_expression("PK = :pk AND SK BETWEEN :low AND :high")
            .expression_attribute_values(":pk", s(versions_pk(id)))
            .expression_attribute_values(":low", s(low))
            .expression_attribute_values(":high", s(high))
            .scan_index_forward(order == Order::Asc)
            .consistent_read(true);
        super::page::keyset_page(query, limit, None, |item| {
            Ok(serde_dynamo::from_item::<_, VersionItem>(item)?.version)
        })
        .await
    }
}
