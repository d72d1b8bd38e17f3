//! A Session's stored runtime history: the requested range, its coverage and its series.

use agentplane_domain::telemetry::history_wire as history;
use agentplane_domain::telemetry::sample::ComputeStart;
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};

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
