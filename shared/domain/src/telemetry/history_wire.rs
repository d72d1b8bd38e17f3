//! The `agent.runtime_history` object, field for field as the spec names them. Every nullable
//! field must be present (`null`), and unknown fields are refused, so the admin client can
//! deserialize into these types as its first check.

use serde::{Deserialize, Serialize};

use super::ids::{AllocationId, EnvironmentId};
use super::sample::ComputeStart;
use super::wire::nullable;
use crate::SessionId;

pub const HISTORY_OBJECT: &str = "agent.runtime_history";
pub const HISTORY_SOURCE: &str = "durable";
/// At most this many series in one response.
pub const MAX_SERIES: usize = 64;
/// At most this many coverage buckets and series points together in one response.
pub const MAX_TOTAL_POINTS: usize = 10_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeHistory {
    pub object: String,
    pub source: String,
    pub session_id: SessionId,
    pub requested_range: RequestedRange,
    pub resolution_seconds: i64,
    pub generated_at: i64,
    pub coverage: Coverage,
    pub series: Vec<RuntimeSeries>,
    pub token_usage: Vec<TokenUsagePoint>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestedRange {
    pub start: i64,
    pub end: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Coverage {
    pub retained_start: i64,
    #[serde(deserialize_with = "nullable")]
    pub first_sample_at: Option<i64>,
    #[serde(deserialize_with = "nullable")]
    pub last_sample_at: Option<i64>,
    pub sample_count: u64,
    pub expected_sample_count: u64,
    pub buckets: Vec<CoverageBucket>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoverageBucket {
    pub start: i64,
    pub end: i64,
    pub first_observed_at: i64,
    pub last_observed_at: i64,
    pub observation_count: u64,
    pub observed_count: u64,
    pub unavailable_count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeSeries {
    pub allocation_id: AllocationId,
    pub environment_id: EnvironmentId,
    pub provider_type: String,
    /// The earliest retained compute start of the allocation; `null` when no retained sample of
    /// the allocation names its compute (for example only `allocation_pending` samples).
    #[serde(deserialize_with = "nullable")]
    pub started_at: Option<ComputeStart>,
    pub points: Vec<SeriesPoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesPoint {
    pub start: i64,
    pub end: i64,
    pub observation_count: u64,
    pub observed_count: u64,
    pub unavailable_count: u64,
    #[serde(deserialize_with = "nullable")]
    pub cpu: Option<CpuPoint>,
    #[serde(deserialize_with = "nullable")]
    pub memory: Option<MemoryPoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuPoint {
    pub utilization_ratio: f64,
    #[serde(deserialize_with = "nullable")]
    pub capacity_cores: Option<f64>,
    pub contributor_count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryPoint {
    #[serde(deserialize_with = "nullable")]
    pub usage_bytes: Option<u64>,
    #[serde(deserialize_with = "nullable")]
    pub limit_bytes: Option<u64>,
    pub contributor_count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenUsagePoint {
    pub start: i64,
    pub end: i64,
    pub sampled_at: i64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}
