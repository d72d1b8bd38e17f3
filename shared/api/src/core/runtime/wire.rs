//! The Core runtime telemetry answers as the api serializes and documents them. Field for field
//! they are the domain's wire types (`telemetry::observation_wire`, `telemetry::history_wire`),
//! which the admin client parses strictly: every nullable field is present, and a unit test
//! holds the two to the same JSON.

use agentplane_domain::session::EnvironmentMode;
use agentplane_domain::telemetry::history_wire as history;
use agentplane_domain::telemetry::observation_wire as observation;
use agentplane_domain::telemetry::sample::{ComputeStart, Reason};
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};

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

/// One Session's stored Runtime history (`agent.runtime_history`).
#[derive(Debug, Serialize, ToSchema)]
pub struct RuntimeHistoryBody {
    /// Always `agent.runtime_history`.
    #[schema(pattern = "^agent\\.runtime_history$")]
    pub object: String,
    /// Always `durable`.
    #[schema(pattern = "^durable$")]
    pub source: String,
    pub session_id: String,
    pub requested_range: RequestedRangeBody,
    /// The bucket width.
    pub resolution_seconds: i64,
    /// The read time, Unix seconds.
    pub generated_at: i64,
    pub coverage: CoverageBody,
    /// One series per managed allocation, at most 64.
    pub series: Vec<RuntimeSeriesBody>,
    pub token_usage: Vec<TokenUsagePointBody>,
}

/// The range asked for, echoed.
#[derive(Debug, Serialize, ToSchema)]
pub struct RequestedRangeBody {
    pub start: i64,
    pub end: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CoverageBody {
    pub retained_start: i64,
    #[schema(required = true)]
    pub first_sample_at: Option<i64>,
    #[schema(required = true)]
    pub last_sample_at: Option<i64>,
    pub sample_count: u64,
    pub expected_sample_count: u64,
    /// Only buckets that hold at least one sample.
    pub buckets: Vec<CoverageBucketBody>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CoverageBucketBody {
    pub start: i64,
    pub end: i64,
    pub first_observed_at: i64,
    pub last_observed_at: i64,
    pub observation_count: u64,
    pub observed_count: u64,
    pub unavailable_count: u64,
}

/// One managed allocation's points.
#[derive(Debug, Serialize, ToSchema)]
pub struct RuntimeSeriesBody {
    pub allocation_id: String,
    pub environment_id: String,
    pub provider_type: String,
    /// The earliest retained compute start of the allocation.
    #[schema(required = true)]
    pub started_at: Option<ComputeStartBody>,
    pub points: Vec<SeriesPointBody>,
}

/// A compute start, JSON-safe.
#[derive(Debug, Serialize, ToSchema)]
pub struct ComputeStartBody {
    pub seconds: i64,
    #[schema(maximum = 999_999_999)]
    pub nanoseconds: u32,
}

impl From<&ComputeStart> for ComputeStartBody {
    fn from(start: &ComputeStart) -> Self {
        Self { seconds: start.seconds, nanoseconds: start.nanoseconds }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SeriesPointBody {
    pub start: i64,
    pub end: i64,
    pub observation_count: u64,
    pub observed_count: u64,
    pub unavailable_count: u64,
    #[schema(required = true)]
    pub cpu: Option<CpuPointBody>,
    #[schema(required = true)]
    pub memory: Option<MemoryPointBody>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CpuPointBody {
    pub utilization_ratio: f64,
    #[schema(required = true)]
    pub capacity_cores: Option<f64>,
    #[schema(minimum = 1)]
    pub contributor_count: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryPointBody {
    #[schema(required = true)]
    pub usage_bytes: Option<u64>,
    #[schema(required = true)]
    pub limit_bytes: Option<u64>,
    #[schema(minimum = 1)]
    pub contributor_count: u64,
}

/// The last cumulative measured Session usage sampled in a bucket.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenUsagePointBody {
    pub start: i64,
    pub end: i64,
    pub sampled_at: i64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl From<&history::RuntimeHistory> for RuntimeHistoryBody {
    fn from(h: &history::RuntimeHistory) -> Self {
        let c = &h.coverage;
        Self {
            object: h.object.clone(),
            source: h.source.clone(),
            session_id: h.session_id.to_string(),
            requested_range: RequestedRangeBody {
                start: h.requested_range.start,
                end: h.requested_range.end,
            },
            resolution_seconds: h.resolution_seconds,
            generated_at: h.generated_at,
            coverage: CoverageBody {
                retained_start: c.retained_start,
                first_sample_at: c.first_sample_at,
                last_sample_at: c.last_sample_at,
                sample_count: c.sample_count,
                expected_sample_count: c.expected_sample_count,
                buckets: c
                    .buckets
                    .iter()
                    .map(|b| CoverageBucketBody {
                        start: b.start,
                        end: b.end,
                        first_observed_at: b.first_observed_at,
                        last_observed_at: b.last_observed_at,
                        observation_count: b.observation_count,
                        observed_count: b.observed_count,
                        unavailable_count: b.unavailable_count,
                    })
                    .collect(),
            },
            series: h.series.iter().map(RuntimeSeriesBody::from).collect(),
            token_usage: h
                .token_usage
                .iter()
                .map(|t| TokenUsagePointBody {
                    start: t.start,
                    end: t.end,
                    sampled_at: t.sampled_at,
                    input_tokens: t.input_tokens,
                    output_tokens: t.output_tokens,
                })
                .collect(),
        }
    }
}

impl From<&history::RuntimeSeries> for RuntimeSeriesBody {
    fn from(s: &history::RuntimeSeries) -> Self {
        Self {
            allocation_id: s.allocation_id.to_string(),
            environment_id: s.environment_id.to_string(),
            provider_type: s.provider_type.clone(),
            started_at: s.started_at.as_ref().map(Into::into),
            points: s
                .points
                .iter()
                .map(|p| SeriesPointBody {
                    start: p.start,
                    end: p.end,
                    observation_count: p.observation_count,
                    observed_count: p.observed_count,
                    unavailable_count: p.unavailable_count,
                    cpu: p.cpu.as_ref().map(|c| CpuPointBody {
                        utilization_ratio: c.utilization_ratio,
                        capacity_cores: c.capacity_cores,
                        contributor_count: c.contributor_count,
                    }),
                    memory: p.memory.as_ref().map(|m| MemoryPointBody {
                        usage_bytes: m.usage_bytes,
                        limit_bytes: m.limit_bytes,
                        contributor_count: m.contributor_count,
                    }),
                })
                .collect(),
        }
    }
}

/// The history query (`HistoryQuery::from_query` parses it): each parameter at most once, any
/// other parameter a 400 `unsupported_parameter`.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct HistoryParams {
    /// Inclusive Unix second, 0 or more.
    #[param(minimum = 0)]
    start: i64,
    /// Exclusive Unix second, after `start`, at most 24 hours after it and at most one second
    /// in the future.
    #[param(minimum = 1)]
    end: i64,
    /// Buckets per array, 2 to 1000 (default 120).
    #[param(minimum = 2, maximum = 1000)]
    max_points: Option<u32>,
}

#[cfg(test)]
mod tests {
    use agentplane_domain::telemetry::observation_wire::{
        AdminRuntimeObservation, ByteUsage, CpuObservation, InstanceKind, LifecycleState, ObservationStatus,
        RuntimeInstance, RuntimeObservationList, RuntimeObservationRow,
    };
    use agentplane_domain::telemetry::{AllocationId, DeviceId, EnvironmentId};
    use agentplane_domain::{ProjectId, SessionId};
    use serde_json::json;

    use super::*;

    fn admin(seed: u8, disk: Option<ByteUsage>) -> AdminRuntimeObservation {
        let session = SessionId::from_random([seed; 16]);
        observation::RuntimeObservation {
            id: session,
            object: observation::OBSERVATION_OBJECT.to_owned(),
            session_id: session,
            environment_id: Some(EnvironmentId::from_random([2; 16])),
            mode: EnvironmentMode::OpenaiHosted,
            provider_type: Some("docker".into()),
            instance: RuntimeInstance {
                kind: InstanceKind::ManagedAllocation,
                allocation_id: Some(AllocationId::from_random([3; 16])),
                device_id: Some(DeviceId::from_random([4; 16])),
                connection_generation: None,
            },
            lifecycle_state: Some(LifecycleState::Active),
            status: ObservationStatus::Observed,
            reason: Some(Reason::SampleTimeout),
            allocation_created_at: Some(10),
            resolved_at: 20,
            observed_at: Some(19),
            started_at: None,
            cpu: Some(CpuObservation {
                usage_seconds_total: Some(1.5),
                capacity_cores: Some(2.0),
                usage_cores: None,
                utilization_ratio: None,
            }),
            memory: Some(ByteUsage { usage_bytes: Some(5), limit_bytes: None }),
        }
        .with_disk(disk)
    }

    #[test]
    fn observations_serialize_as_the_domain_types() {
        let single = admin(1, None).split().0;
        assert_eq!(json!(RuntimeObservationBody::from(&single)), json!(single));
        let rows = vec![
            RuntimeObservationRow {
                project_id: ProjectId::from_random([9; 16]),
                observation: admin(1, Some(ByteUsage { usage_bytes: Some(1), limit_bytes: Some(2) })),
            },
            RuntimeObservationRow {
                project_id: ProjectId::from_random([8; 16]),
                observation: admin(5, None),
            },
        ];
        for list in [RuntimeObservationList::new(rows, true), RuntimeObservationList::new(Vec::new(), false)]
        {
            let domain = json!(list);
            assert_eq!(json!(observation_list(list)), domain);
        }
    }

    #[test]
    fn history_serializes_as_the_domain_type() {
        let h = history::RuntimeHistory {
            object: history::HISTORY_OBJECT.to_owned(),
            source: history::HISTORY_SOURCE.to_owned(),
            session_id: SessionId::from_random([1; 16]),
            requested_range: history::RequestedRange { start: 0, end: 120 },
            resolution_seconds: 60,
            generated_at: 121,
            coverage: history::Coverage {
                retained_start: 0,
                first_sample_at: Some(1),
                last_sample_at: None,
                sample_count: 2,
                expected_sample_count: 4,
                buckets: vec![history::CoverageBucket {
                    start: 0,
                    end: 60,
                    first_observed_at: 1,
                    last_observed_at: 50,
                    observation_count: 2,
                    observed_count: 1,
                    unavailable_count: 1,
                }],
            },
            series: vec![history::RuntimeSeries {
                allocation_id: AllocationId::from_random([3; 16]),
                environment_id: EnvironmentId::from_random([2; 16]),
                provider_type: "e2b".into(),
                started_at: ComputeStart::new(5, 6),
                points: vec![
                    history::SeriesPoint {
                        start: 0,
                        end: 60,
                        observation_count: 2,
                        observed_count: 1,
                        unavailable_count: 1,
                        cpu: Some(history::CpuPoint {
                            utilization_ratio: 0.5,
                            capacity_cores: None,
                            contributor_count: 1,
                        }),
                        memory: Some(history::MemoryPoint {
                            usage_bytes: Some(7),
                            limit_bytes: None,
                            contributor_count: 1,
                        }),
                    },
                    history::SeriesPoint {
                        start: 60,
                        end: 120,
                        observation_count: 1,
                        observed_count: 0,
                        unavailable_count: 1,
                        cpu: None,
                        memory: None,
                    },
                ],
            }],
            token_usage: vec![history::TokenUsagePoint {
                start: 0,
                end: 60,
                sampled_at: 30,
                input_tokens: 3,
                output_tokens: 4,
            }],
        };
        assert_eq!(json!(RuntimeHistoryBody::from(&h)), json!(h));
    }
}
