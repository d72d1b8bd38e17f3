//! Sandboxes. One item per sandbox, keyed by its id alone (the node reports by sandbox id);
//! the owning project is an attribute that every project-facing read checks.
//!
//! | item    | PK              | SK        | GSI1 (by_created)                        | GSI2 (by_due)                        |
//! |---------|-----------------|-----------|------------------------------------------|--------------------------------------|
//! | sandbox | `SANDBOX#{id}`  | `SANDBOX` | `PROJECT#{pid}#SANDBOXES` / created#id   | `NODE#{nid}#SANDBOXES` / end_at#id while not ended |
//!
//! Every lifecycle change is a conditional update on the state and deadline that the rule
//! was computed from, so two concurrent changes never both apply.

use agentplane_domain::ids::NodeId;
use std::collections::HashMap;

use agentplane_domain::page::{Order, Page, PageLimit, created_sort_key};
use agentplane_domain::sandbox::{Lifecycle, Sandbox, SandboxId};
use agentplane_domain::{ProjectId, Timestamp};
use aws_sdk_dynamodb::types::ReturnValue;
use serde::{Deserialize, Serialize};

use super::page::query_created;
use super::{conditional, get_as, put_new, query_all, s};
use crate::resources::BY_DUE;
use crate::{Store, StoreError};

pub fn sandbox_pk(id: &SandboxId) -> String {
    format!("SANDBOX#{id}")
}
pub const SANDBOX_SK: &str = "SANDBOX";
fn sandboxes_list(project: &ProjectId) -> String {
    format!("PROJECT#{project}#SANDBOXES")
}
fn node_sandboxes(node: &NodeId) -> String {
    format!("NODE#{node}#SANDBOXES")
}
fn due_key(end_at: Timestamp, id: &SandboxId) -> String {
    format!("{:015}#{id}", end_at.unix_millis().max(0))
}

#[derive(Serialize, Deserialize)]
pub(crate) struct SandboxItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK")]
    gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
    #[serde(rename = "GSI2PK", default, skip_serializing_if = "Option::is_none")]
    gsi2pk: Option<String>,
    #[serde(rename = "GSI2SK", default, skip_serializing_if = "Option::is_none")]
    gsi2sk: Option<String>,
    /// Observed processes started so far (`obs-<n>` numbers are handed out from it).
    #[serde(default)]
    processes_started: u32,
    #[serde(flatten)]
    pub(crate) sandbox: Sandbox,
}

pub struct Sandboxes<'a> {
    store: &'a Store,
}

impl<'a> Sandboxes<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn table(&self) -> &str {
        &self.store.names.main_table
    }

    pub async fn create(&self, sandbox: &Sandbox) -> Result<(), StoreError> {
        put_new(self.store, self.table(), Self::item(sandbox)).await
    }

    /// Records a new sandbox if its project has fewer than `max` live sandboxes of the sandbox
    /// API at `now` (see [`super::live_sandboxes`]).
    pub async fn create_capped(
        &self,
        sandbox: &Sandbox,
        max: u32,
        now: Timestamp,
    ) -> Result<(), super::live_sandboxes::CapError> {
        super::live_sandboxes::create(self.store, Self::item(sandbox), sandbox, max, now).await
    }

    fn item(sandbox: &Sandbox) -> SandboxItem {
        SandboxItem {
            pk: sandbox_pk(&sandbox.id),
            sk: SANDBOX_SK.into(),
            gsi1pk: sandboxes_list(&sandbox.project_id),
            gsi1sk: created_sort_key(sandbox.started_at, &sandbox.id),
            gsi2pk: Some(node_sandboxes(&sandbox.node_id)),
            gsi2sk: Some(due_key(sandbox.lifecycle.end_at, &sandbox.id)),
            processes_started: 0,
            sandbox: sandbox.clone(),
        }
    }

    /// Any sandbox, whoever owns it (the node API's view).
    pub async fn get_any(&self, id: &SandboxId) -> Result<Sandbox, StoreError> {
        let item: Option<SandboxItem> = get_as(self.store, self.table(), sandbox_pk(id), SANDBOX_SK).await?;
        Ok(item.ok_or(StoreError::NotFound)?.sandbox)
    }

    /// A sandbox of `project`; another project's is `NotFound`.
    pub async fn get(&self, project: &ProjectId, id: &SandboxId) -> Result<Sandbox, StoreError> {
        let sandbox = self.get_any(id).await?;
        if sandbox.project_id == *project { Ok(sandbox) } else { Err(StoreError::NotFound) }
    }

    /// The project's sandboxes, newest first (at most `limit`).
    pub async fn list(&self, project: &ProjectId, limit: PageLimit) -> Result<Vec<Sandbox>, StoreError> {
        let page =
            query_created::<SandboxItem>(self.store, &sandboxes_list(project), None, limit, Order::Desc)
                .await?;
        Ok(page.items.into_iter().map(|i| i.sandbox).collect())
    }

    /// One keyset page of the project's sandboxes, newest first, after `after` (exclusive; a
    /// sandbox of the project, as read). A caller filtering what it shows pages on from the last
    /// sandbox it examined.
    pub async fn page_after(
        &self,
        project: &ProjectId,
        after: Option<&Sandbox>,
        limit: PageLimit,
    ) -> Result<Page<Sandbox>, StoreError> {
        let start = after.map(|a| {
            HashMap::from([
                ("PK".to_owned(), s(sandbox_pk(&a.id))),
                ("SK".to_owned(), s(SANDBOX_SK)),
                ("GSI1PK".to_owned(), s(sandboxes_list(project))),
                ("GSI1SK".to_owned(), s(created_sort_key(a.started_at, &a.id))),
            ])
        });
        let page =
            query_created::<SandboxItem>(self.store, &sandboxes_list(project), start, limit, Order::Desc)
                .await?;
        Ok(Page { items: page.items.into_iter().map(|i| i.sandbox).collect(), has_more: page.has_more })
    }

    /// The sandboxes a node hosts and has not seen end.
    pub async fn hosted_by(&self, node: &NodeId) -> Result<Vec<Sandbox>, StoreError> {
        let query = self
            .store
            .dynamo
            .query()
            .table_name(self.table())
            .index_name(BY_DUE)
            .key_condition_expression("GSI2PK = :pk")
            .expression_attribute_values(":pk", s(node_sandboxes(node)));
        let items: Vec<SandboxItem> = query_all(query).await?;
        Ok(items.into_iter().map(|i| i.sandbox).collect())
    }

    /// Moves a sandbox from the lifecycle `from` (as read) to `to`. `Conflict` when it changed
    /// in between. An ended sandbox leaves its node's index.
    pub async fn transition(
        &self,
        sandbox: &Sandbox,
        from: &Lifecycle,
        to: &Lifecycle,
    ) -> Result<Sandbox, StoreError> {
        let mut request = self
            .store
            .dynamo
            .update_item()
            .table_name(self.table())
            .key("PK", s(sandbox_pk(&sandbox.id)))
            .key("SK", s(SANDBOX_SK))
            .condition_expression("#state = :from_state AND end_at = :from_end")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":from_state", serde_dynamo::to_attribute_value(from.state)?)
            .expression_attribute_values(":from_end", serde_dynamo::to_attribute_value(from.end_at)?)
            .expression_attribute_values(":state", serde_dynamo::to_attribute_value(to.state)?)
            .expression_attribute_values(":end", serde_dynamo::to_attribute_value(to.end_at)?)
            .return_values(ReturnValue::AllNew);
        let mut set = vec!["#state = :state", "end_at = :end"];
        let mut remove = Vec::new();
        match to.paused_remaining_ms {
            Some(ms) => {
                set.push("paused_remaining_ms = :rem");
                request = request.expression_attribute_values(":rem", serde_dynamo::to_attribute_value(ms)?);
            }
            None => remove.push("paused_remaining_ms"),
        }
        if to.state.is_final() {
            remove.extend(["GSI2PK", "GSI2SK"]);
        } else {
            set.push("GSI2SK = :due");
            request = request.expression_attribute_values(":due", s(due_key(to.end_at, &sandbox.id)));
        }
        let mut expression = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        let out = request
            .update_expression(expression)
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(serde_dynamo::from_item::<_, SandboxItem>(out.attributes.unwrap_or_default())?.sandbox)
    }

    /// Hands out the next `obs-<n>` number, only while the sandbox is running at `now`.
    pub async fn next_process_number(&self, id: &SandboxId, now: Timestamp) -> Result<u32, StoreError> {
        let out = self
            .store
            .dynamo
            .update_item()
            .table_name(self.table())
            .key("PK", s(sandbox_pk(id)))
            .key("SK", s(SANDBOX_SK))
            .condition_expression("#state = :running AND end_at > :now")
            .update_expression("ADD processes_started :one")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":running", s("running"))
            .expression_attribute_values(":now", serde_dynamo::to_attribute_value(now)?)
            .expression_attribute_values(":one", aws_sdk_dynamodb::types::AttributeValue::N("1".into()))
            .return_values(ReturnValue::UpdatedNew)
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        out.attributes
            .and_then(|a| a.get("processes_started").and_then(|v| v.as_n().ok()).and_then(|n| n.parse().ok()))
            .ok_or_else(|| StoreError::Corrupt("processes_started".into()))
    }

    pub async fn set_isolation(
        &self,
        id: &SandboxId,
        isolation: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), StoreError> {
        self.store
            .dynamo
            .update_item()
            .table_name(self.table())
            .key("PK", s(sandbox_pk(id)))
            .key("SK", s(SANDBOX_SK))
            .condition_expression("attribute_exists(PK)")
            .update_expression("SET #iso = :iso")
            .expression_attribute_names("#iso", "isolation")
            .expression_attribute_values(":iso", serde_dynamo::to_attribute_value(isolation)?)
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }
}
