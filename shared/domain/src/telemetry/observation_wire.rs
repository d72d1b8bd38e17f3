//! The `agent.runtime_observation` object and the admin list page, field for field as the spec
//! names them. Nullable fields must be present; unknown fields are refused.

use serde::{Deserialize, Serialize};

use super::ids::{AllocationId, DeviceId, EnvironmentId};
use super::sample::Reason;
use super::wire::nullable;
use crate::session::EnvironmentMode;
use crate::{ProjectId, SessionId};

pub const OBSERVATION_OBJECT: &str = "agent.runtime_observation";
pub const LIST_OBJECT: &str = "list";

/// Core's own lifecycle view of a managed allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LifecycleState {
    Pending,
    Active,
    Sleeping,
    Transitioning,
    Stopped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservationStatus {
    Observed,
    Unsupported,
    Unavailable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceKind {
    ManagedAllocation,
    SelfHostedConnection,
    None,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeInstance {
    pub kind: InstanceKind,
    #[serde(deserialize_with = "nullable")]
    pub allocation_id: Option<AllocationId>,
    #[serde(deserialize_with = "nullable")]
    pub device_id: Option<DeviceId>,
    /// Always null: Core does not observe self-hosted connections.
    #[serde(deserialize_with = "nullable")]
    pub connection_generation: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuObservation {
    #[serde(deserialize_with = "nullable")]
    pub usage_seconds_total: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pub capacity_cores: Option<f64>,
    /// Always null.
    #[serde(deserialize_with = "nullable")]
    pub usage_cores: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pub utilization_ratio: Option<f64>,
}

/// Memory or disk: safe JSON integers or null; `limit_bytes` at least 1 when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByteUsage {
    #[serde(deserialize_with = "nullable")]
    pub usage_bytes: Option<u64>,
    #[serde(deserialize_with = "nullable")]
    pub limit_bytes: Option<u64>,
}

/// One Session's Runtime observation, as the single read returns it (no `disk`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeObservation {
    pub id: SessionId,
    pub object: String,
    pub session_id: SessionId,
    #[serde(deserialize_with = "nullable")]
    pub environment_id: Option<EnvironmentId>,
    pub mode: EnvironmentMode,
    #[serde(deserialize_with = "nullable")]
    pub provider_type: Option<String>,
    pub instance: RuntimeInstance,
    #[serde(deserialize_with = "nullable")]
    pub lifecycle_state: Option<LifecycleState>,
    pub status: ObservationStatus,
    #[serde(deserialize_with = "nullable")]
    pub reason: Option<Reason>,
    #[serde(deserialize_with = "nullable")]
    pub allocation_created_at: Option<i64>,
    pub resolved_at: i64,
    #[serde(deserialize_with = "nullable")]
    pub observed_at: Option<i64>,
    #[serde(deserialize_with = "nullable")]
    pub started_at: Option<i64>,
    #[serde(deserialize_with = "nullable")]
    pub cpu: Option<CpuObservation>,
    #[serde(deserialize_with = "nullable")]
    pub memory: Option<ByteUsage>,
}

/// A list row's observation: the [`RuntimeObservation`] plus `disk`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminRuntimeObservation {
    pub id: SessionId,
    pub object: String,
    pub session_id: SessionId,
    #[serde(deserialize_with = "nullable")]
    pub environment_id: Option<EnvironmentId>,
    pub mode: EnvironmentMode,
    #[serde(deserialize_with = "nullable")]
    pub provider_type: Option<String>,
    pub instance: RuntimeInstance,
    #[serde(deserialize_with = "nullable")]
    pub lifecycle_state: Option<LifecycleState>,
    pub status: ObservationStatus,
    #[serde(deserialize_with = "nullable")]
    pub reason: Option<Reason>,
    #[serde(deserialize_with = "nullable")]
    pub allocation_created_at: Option<i64>,
    pub resolved_at: i64,
    #[serde(deserialize_with = "nullable")]
    pub observed_at: Option<i64>,
    #[serde(deserialize_with = "nullable")]
    pub started_at: Option<i64>,
    #[serde(deserialize_with = "nullable")]
    pub cpu: Option<CpuObservation>,
    #[serde(deserialize_with = "nullable")]
    pub memory: Option<ByteUsage>,
    #[serde(deserialize_with = "nullable")]
    pub disk: Option<ByteUsage>,
}

impl RuntimeObservation {
    pub fn with_disk(self, disk: Option<ByteUsage>) -> AdminRuntimeObservation {
        AdminRuntimeObservation {
            id: self.id,
            object: self.object,
            session_id: self.session_id,
            environment_id: self.environment_id,
            mode: self.mode,
            provider_type: self.provider_type,
            instance: self.instance,
            lifecycle_state: self.lifecycle_state,
            status: self.status,
            reason: self.reason,
            allocation_created_at: self.allocation_created_at,
            resolved_at: self.resolved_at,
            observed_at: self.observed_at,
            started_at: self.started_at,
            cpu: self.cpu,
            memory: self.memory,
            disk,
        }
    }
}

impl AdminRuntimeObservation {
    /// The observation without its disk, and the disk.
    pub fn split(self) -> (RuntimeObservation, Option<ByteUsage>) {
        let observation = RuntimeObservation {
            id: self.id,
            object: self.object,
            session_id: self.session_id,
            environment_id: self.environment_id,
            mode: self.mode,
            provider_type: self.provider_type,
            instance: self.instance,
            lifecycle_state: self.lifecycle_state,
            status: self.status,
            reason: self.reason,
            allocation_created_at: self.allocation_created_at,
            resolved_at: self.resolved_at,
            observed_at: self.observed_at,
            started_at: self.started_at,
            cpu: self.cpu,
            memory: self.memory,
        };
        (observation, self.disk)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeObservationRow {
    pub project_id: ProjectId,
    pub observation: AdminRuntimeObservation,
}

/// One page of `GET /core/v1/sandbox/runtime-observations`. `first_id`/`last_id` are null on an
/// empty page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeObservationList {
    pub object: String,
    pub data: Vec<RuntimeObservationRow>,
    pub has_more: bool,
    #[serde(deserialize_with = "nullable")]
    pub first_id: Option<SessionId>,
    #[serde(deserialize_with = "nullable")]
    pub last_id: Option<SessionId>,
}

impl RuntimeObservationList {
    pub fn new(data: Vec<RuntimeObservationRow>, has_more: bool) -> Self {
        let first_id = data.first().map(|r| r.observation.id);
        let last_id = data.last().map(|r| r.observation.id);
        Self { object: LIST_OBJECT.to_owned(), data, has_more, first_id, last_id }
    }
}
