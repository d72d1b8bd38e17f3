//! Managed allocations in the main table: the compute of one openai_hosted Session, under its
//! project's partition and keyed by the Session (a Session has at most one allocation).
//!
//! Lifecycle: created `pending` with the Session; the sandbox side binds it to a sandbox and makes
//! it `running` ([`Allocations::activate`]); other transitions go through
//! [`Allocations::set_state`]; releasing the Session stops it ([`Allocations::release`]). While it
//! is not stopped it sits in the GSI1 partition `ALLOCATIONS`, which is what the sampler walks.

use std::collections::HashMap;

use agentplane_domain::page::created_sort_key;
use agentplane_domain::sandbox::SandboxId;
use agentplane_domain::telemetry::observation_wire::LifecycleState;
use agentplane_domain::telemetry::{AllocationState, DeviceId};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::ReturnValue;
use serde::{Deserialize, Serialize};

use super::keys::{LIVE_ALLOCATIONS_LIST, allocation_sk, project_pk};
use super::{batch_get_as, conditional, get_as, put_new, query_all, s};
use crate::resources::BY_CREATED;
use crate::{Store, StoreError};

pub use agentplane_domain::allocation::Allocation;

#[derive(Serialize, Deserialize)]
struct AllocationItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK", default, skip_serializing_if = "Option::is_none")]
    gsi1pk: Option<String>,
    #[serde(rename = "GSI1SK", default, skip_serializing_if = "Option::is_none")]
    gsi1sk: Option<String>,
    #[serde(flatten)]
    allocation: Allocation,
}

pub struct Allocations<'a> {
    store: &'a Store,
}

fn state_value(state: AllocationState) -> Result<aws_sdk_dynamodb::types::AttributeValue, StoreError> {
    Ok(serde_dynamo::to_attribute_value(state)?)
}

impl<'a> Allocations<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    /// Stores a new allocation; `Conflict` when the Session already has one.
    pub async fn create(&self, allocation: &Allocation) -> Result<(), StoreError> {
        let live = allocation.record.state.lifecycle() != LifecycleState::Stopped;
        let item = AllocationItem {
            pk: project_pk(&allocation.project_id),
            sk: allocation_sk(&allocation.session_id),
            gsi1pk: live.then(|| LIVE_ALLOCATIONS_LIST.to_owned()),
            gsi1sk: live
                .then(|| created_sort_key(allocation.record.created_at, &allocation.record.allocation_id)),
            allocation: allocation.clone(),
        };
        put_new(self.store, &self.store.names.main_table, item).await
    }

    /// The Session's allocation, if it has one.
    pub async fn get(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> Result<Option<Allocation>, StoreError> {
        let item: Option<AllocationItem> =
            get_as(self.store, &self.store.names.main_table, project_pk(project), allocation_sk(session))
                .await?;
        Ok(item.map(|i| i.allocation))
    }

    /// The allocations of many Sessions at once (BatchGetItem, 100 keys a call), by Session.
    pub async fn get_many(
        &self,
        sessions: &[(ProjectId, SessionId)],
    ) -> Result<HashMap<SessionId, Allocation>, StoreError> {
        let keys = sessions.iter().map(|(project, session)| (project_pk(project), allocation_sk(session)));
        let items: Vec<AllocationItem> = batch_get_as(self.store, &self.store.names.main_table, keys).await?;
        Ok(items.into_iter().map(|i| (i.allocation.session_id, i.allocation)).collect())
    }

    /// Binds the allocation to a sandbox and marks it running: a new compute incarnation.
    /// `replacing` is the sandbox it must still be bound to (`None`: none yet), so two placements
    /// racing for one allocation bind one sandbox. `NotFound` without an allocation; `Conflict`
    /// when it is stopped (cleanup pending or released) or bound to another sandbox.
    pub async fn activate(
        &self,
        project: &ProjectId,
        session: &SessionId,
        sandbox_id: &SandboxId,
        replacing: Option<&SandboxId>,
        device_id: Option<DeviceId>,
        now: Timestamp,
    ) -> Result<Allocation, StoreError> {
        // An unbound allocation stores `sandbox_id` as NULL (serde's None) or not at all.
        let bound = match replacing {
            Some(_) => "sandbox_id = :replacing",
            None => "(attribute_not_exists(sandbox_id) OR attribute_type(sandbox_id, :null))",
        };
        let mut request = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(allocation_sk(session)))
            .condition_expression(format!(
                "attribute_exists(PK) AND NOT #st IN (:cleanup, :released) AND {bound}"
            ))
            .expression_attribute_names("#st", "state")
            .expression_attribute_values(":cleanup", state_value(AllocationState::CleanupPending)?)
            .expression_attribute_values(":released", state_value(AllocationState::Released)?)
            .expression_attribute_values(":running", state_value(AllocationState::Running)?)
            .expression_attribute_values(":sandbox", s(sandbox_id.as_str()))
            .expression_attribute_values(":now", serde_dynamo::to_attribute_value(now)?)
            .return_values(ReturnValue::AllNew);
        let mut sets = "SET #st = :running, sandbox_id = :sandbox, updated_at = :now".to_owned();
        request = match replacing {
            Some(old) => request.expression_attribute_values(":replacing", s(old.as_str())),
            None => request.expression_attribute_values(":null", s("NULL")),
        };
        if let Some(device) = device_id {
            sets.push_str(", device_id = :device");
            request = request.expression_attribute_values(":device", s(device.to_string()));
        }
        let out = request.update_expression(sets).send().await;
        self.finish(project, session, out).await
    }

    /// Moves the allocation to `state` (a suspend, a wake, a cleanup). A stopped allocation
    /// leaves the sampler's listing. `Conflict` when it is already released.
    pub async fn set_state(
        &self,
        project: &ProjectId,
        session: &SessionId,
        state: AllocationState,
        now: Timestamp,
    ) -> Result<Allocation, StoreError> {
        let update = if state.lifecycle() == LifecycleState::Stopped {
            "SET #st = :state, updated_at = :now REMOVE GSI1PK, GSI1SK"
        } else {
            "SET #st = :state, updated_at = :now"
        };
        let out = self
            .store
            .dynamo
            .update_item()
            .table_name(&self.store.names.main_table)
            .key("PK", s(project_pk(project)))
            .key("SK", s(allocation_sk(session)))
            .condition_expression("attribute_exists(PK) AND #st <> :released")
            .update_expression(update)
            .expression_attribute_names("#st", "state")
            .expression_attribute_values(":released", state_value(AllocationState::Released)?)
            .expression_attribute_values(":state", state_value(state)?)
            .expression_attribute_values(":now", serde_dynamo::to_attribute_value(now)?)
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        self.finish(project, session, out).await
    }

    /// Releases the Session's allocation (the Session was released). Idempotent: releasing a
    /// released allocation changes nothing; a Session without one is `NotFound`.
    pub async fn release(
        &self,
        project: &ProjectId,
        session: &SessionId,
        now: Timestamp,
    ) -> Result<Allocation, StoreError> {
        match self.set_state(project, session, AllocationState::Released, now).await {
            Err(StoreError::Conflict) => self.get(project, session).await?.ok_or(StoreError::NotFound),
            other => other,
        }
    }

    async fn finish(
        &self,
        project: &ProjectId,
        session: &SessionId,
        out: Result<UpdateItemOutput, SdkError<UpdateItemError, HttpResponse>>,
    ) -> Result<Allocation, StoreError> {
        match out {
            Ok(out) => {
                let item: AllocationItem = serde_dynamo::from_item(out.attributes.unwrap_or_default())?;
                Ok(item.allocation)
            }
            Err(err) => match conditional(err, UpdateItemError::is_conditional_check_failed_exception) {
                StoreError::Conflict => match self.get(project, session).await? {
                    Some(_) => Err(StoreError::Conflict),
                    None => Err(StoreError::NotFound),
                },
                other => Err(other),
            },
        }
    }

    /// Every allocation that is not stopped: what the sampler samples.
    pub async fn list_live(&self) -> Result<Vec<Allocation>, StoreError> {
        let query = self
            .store
            .dynamo
            .query()
            .table_name(&self.store.names.main_table)
            .index_name(BY_CREATED)
            .key_condition_expression("GSI1PK = :list")
            .expression_attribute_values(":list", s(LIVE_ALLOCATIONS_LIST));
        let items: Vec<AllocationItem> = query_all(query).await?;
        Ok(items.into_iter().map(|i| i.allocation).collect())
    }
}
