//! A Session's runtime as last observed: its mode, lifecycle, instance and usage.

use agentplane_domain::session::EnvironmentMode;
use agentplane_domain::telemetry::observation_wire as observation;
use agentplane_domain::telemetry::sample::Reason;
use serde::Serialize;
use utoipa::ToSchema;

use crate::list::List;

/// Where a Session's runtime lives.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeModeBody {
    None,
    SelfHosted,
    OpenaiHosted,
}

impl From<EnvironmentMode> for RuntimeModeBody {
    fn from(mode: EnvironmentMode) -> Self {
        match mode {
            EnvironmentMode::None => Self::None,
            EnvironmentMode::SelfHosted => Self::SelfHosted,
            EnvironmentMode::OpenaiHosted => Self::OpenaiHosted,
        }
    }
}

/// Core's own lifecycle view of a managed allocation.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LifecycleStateBody {
    Pending,
    Active,
    Sleeping,
    Transitioning,
    Stopped,
}

impl From<observation::LifecycleState> for LifecycleStateBody {
    fn from(state: observation::LifecycleState) -> Self {
        use observation::LifecycleState as S;
        match state {
            S::Pending => Self::Pending,
            S::Active => Self::Active,
            S::Sleeping => Self::Sleeping,
            S::Transitioning => Self::Transitioning,
            S::Stopped => Self::Stopped,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObservationStatusBody {
    Observed,
    Unsupported,
    Unavailable,
}

impl From<observation::ObservationStatus> for ObservationStatusBody {
    fn from(status: observation::ObservationStatus) -> Self {
        use observation::ObservationStatus as S;
        match status {
            S::Observed => Self::Observed,
            S::Unsupported => Self::Unsupported,
            S::Unavailable => Self::Unavailable,
        }
    }
}

/// Why an observation has no value.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObservationReasonBody {
    RuntimeModeNotObservable,
    AllocationPending,
    RuntimeNotRunning,
    SourceNotConfigured,
    SampleTimeout,
    SampleUnavailable,
}

impl From<Reason> for ObservationReasonBody {
    fn from(reason: Reason) -> Self {
        match reason {
            Reason::RuntimeModeNotObservable => Self::RuntimeModeNotObservable,
            Reason::AllocationPending => Self::AllocationPending,
            Reason::RuntimeNotRunning => Self::RuntimeNotRunning,
            Reason::SourceNotConfigured => Self::SourceNotConfigured,
            Reason::SampleTimeout => Self::SampleTimeout,
            Reason::SampleUnavailable => Self::SampleUnavailable,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InstanceKindBody {
    ManagedAllocation,
    SelfHostedConnection,
    None,
}

impl From<observation::InstanceKind> for InstanceKindBody {
    fn from(kind: observation::InstanceKind) -> Self {
        use observation::InstanceKind as K;
        match kind {
            K::ManagedAllocation => Self::ManagedAllocation,
            K::SelfHostedConnection => Self::SelfHostedConnection,
            K::None => Self::None,
        }
    }
}

/// What runs the Session's Runtime.
#[derive(Debug, Serialize, ToSchema)]
pub struct RuntimeInstanceBody {
    pub kind: InstanceKindBody,
    #[schema(required = true)]
    pub allocation_id: Option<String>,
    #[schema(required = true)]
    pub device_id: Option<String>,
    /// Always `null`: Core does not observe self-hosted connections.
    #[schema(required = true)]
    pub connection_generation: Option<u64>,
}

impl From<&observation::RuntimeInstance> for RuntimeInstanceBody {
    fn from(instance: &observation::RuntimeInstance) -> Self {
        Self {
            kind: instance.kind.into(),
            allocation_id: instance.allocation_id.map(|id| id.to_string()),
            device_id: instance.device_id.map(|id| id.to_string()),
            connection_generation: instance.connection_generation,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CpuObservationBody {
    /// Cumulative CPU seconds of the current compute.
    #[schema(required = true)]
    pub usage_seconds_total: Option<f64>,
    /// Configured CPU capacity, greater than zero.
    #[schema(required = true)]
    pub capacity_cores: Option<f64>,
    /// Always `null`.
    #[schema(required = true)]
    pub usage_cores: Option<f64>,
    /// Provider-reported share of `capacity_cores` (E2B), not clamped.
    #[schema(required = true)]
    pub utilization_ratio: Option<f64>,
}

impl From<&observation::CpuObservation> for CpuObservationBody {
    fn from(cpu: &observation::CpuObservation) -> Self {
        Self {
            usage_seconds_total: cpu.usage_seconds_total,
            capacity_cores: cpu.capacity_cores,
            usage_cores: cpu.usage_cores,
            utilization_ratio: cpu.utilization_ratio,
        }
    }
}

/// Memory or disk: safe JSON integers or `null`; `limit_bytes` at least 1 when known.
#[derive(Debug, Serialize, ToSchema)]
pub struct ByteUsageBody {
    #[schema(required = true)]
    pub usage_bytes: Option<u64>,
    #[schema(required = true, minimum = 1)]
    pub limit_bytes: Option<u64>,
}

impl From<&observation::ByteUsage> for ByteUsageBody {
    fn from(usage: &observation::ByteUsage) -> Self {
        Self { usage_bytes: usage.usage_bytes, limit_bytes: usage.limit_bytes }
    }
}

/// One Session's Runtime observation (`agent.runtime_observation`). Which combinations of
/// `status`, `mode` and fields are valid is the spec's table.
#[derive(Debug, Serialize, ToSchema)]
pub struct RuntimeObservationBody {
    /// The Session id.
    pub id: String,
    /// Always `agent.runtime_observation`.
    #[schema(pattern = "^agent\\.runtime_observation$")]
    pub object: String,
    pub session_id: String,
    #[schema(required = true)]
    pub environment_id: Option<String>,
    pub mode: RuntimeModeBody,
    #[schema(required = true)]
    pub provider_type: Option<String>,
    pub instance: RuntimeInstanceBody,
    #[schema(required = true)]
    pub lifecycle_state: Option<LifecycleStateBody>,
    pub status: ObservationStatusBody,
    #[schema(required = true)]
    pub reason: Option<ObservationReasonBody>,
    /// Unix seconds.
    #[schema(required = true)]
    pub allocation_created_at: Option<i64>,
    /// Unix seconds.
    pub resolved_at: i64,
    /// Unix seconds.
    #[schema(required = true)]
    pub observed_at: Option<i64>,
    /// Unix seconds.
    #[schema(required = true)]
    pub started_at: Option<i64>,
    #[schema(required = true)]
    pub cpu: Option<CpuObservationBody>,
    #[schema(required = true)]
    pub memory: Option<ByteUsageBody>,
}

impl From<&observation::RuntimeObservation> for RuntimeObservationBody {
    fn from(o: &observation::RuntimeObservation) -> Self {
        Self {
            id: o.id.to_string(),
            object: o.object.clone(),
            session_id: o.session_id.to_string(),
            environment_id: o.environment_id.map(|id| id.to_string()),
            mode: o.mode.into(),
            provider_type: o.provider_type.clone(),
            instance: (&o.instance).into(),
            lifecycle_state: o.lifecycle_state.map(Into::into),
            status: o.status.into(),
            reason: o.reason.map(Into::into),
            allocation_created_at: o.allocation_created_at,
            resolved_at: o.resolved_at,
            observed_at: o.observed_at,
            started_at: o.started_at,
            cpu: o.cpu.as_ref().map(Into::into),
            memory: o.memory.as_ref().map(Into::into),
        }
    }
}

/// A list row's observation: the Runtime observation plus `disk`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AdminRuntimeObservationBody {
    #[serde(flatten)]
    pub observation: RuntimeObservationBody,
    /// Only on an observed row, when the provider reports it.
    #[schema(required = true)]
    pub disk: Option<ByteUsageBody>,
}

/// One row of the observation list.
#[derive(Debug, Serialize, ToSchema)]
pub struct RuntimeObservationRowBody {
    pub project_id: String,
    pub observation: AdminRuntimeObservationBody,
}

/// The observation list page from the domain's.
pub fn observation_list(list: observation::RuntimeObservationList) -> List<RuntimeObservationRowBody> {
    let data = list
        .data
        .into_iter()
        .map(|row| {
            let (observation, disk) = row.observation.split();
            RuntimeObservationRowBody {
                project_id: row.project_id.to_string(),
                observation: AdminRuntimeObservationBody {
                    observation: RuntimeObservationBody::from(&observation),
                    disk: disk.as_ref().map(Into::into),
                },
            }
        })
        .collect();
    List {
        object: "list",
        data,
        has_more: list.has_more,
        first_id: list.first_id.map(|id| id.to_string()),
        last_id: list.last_id.map(|id| id.to_string()),
    }
}
