//! What the sampler stores for a Session every sampling interval, and the reasons a sample or an
//! observation can lack a value.

use serde::{Deserialize, Serialize};

use super::ids::{AllocationId, EnvironmentId};
use crate::Timestamp;

/// Why a Runtime observation or sample has no value. The wire enum of `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// none and self_hosted Sessions.
    RuntimeModeNotObservable,
    /// The managed allocation does not exist yet or is being created.
    AllocationPending,
    /// Cleanup pending or released, or the provider reports the Runtime absent, stopped or suspended.
    RuntimeNotRunning,
    /// No observation source serves the allocation's provider.
    SourceNotConfigured,
    /// The provider read exceeded its deadline.
    SampleTimeout,
    /// The provider could not produce a current sample.
    SampleUnavailable,
}

/// The start of one compute incarnation, JSON-safe: whole seconds plus 0..=999,999,999 ns.
/// A new incarnation (a restore, a replacement) has a new start, so this is also the identity
/// that decides whether two cumulative CPU counters can be subtracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeStart {
    pub seconds: i64,
    pub nanoseconds: u32,
}

impl ComputeStart {
    pub const MAX_NANOSECONDS: u32 = 999_999_999;

    /// `None` when `nanoseconds` is out of range.
    pub fn new(seconds: i64, nanoseconds: u32) -> Option<Self> {
        (nanoseconds <= Self::MAX_NANOSECONDS).then_some(Self { seconds, nanoseconds })
    }

    /// The start `at`, exact to the millisecond.
    pub fn from_timestamp(at: crate::Timestamp) -> Self {
        let ms = at.unix_millis();
        // rem_euclid(1000) * 1_000_000 is at most 999_000_000: always in range.
        Self {
            seconds: ms.div_euclid(1000),
            nanoseconds: u32::try_from(ms.rem_euclid(1000) * 1_000_000).unwrap_or(0),
        }
    }

    /// The start as a Timestamp (to the millisecond, rounded down).
    pub fn to_timestamp(self) -> crate::Timestamp {
        crate::Timestamp::from_unix_millis(
            self.seconds.saturating_mul(1000).saturating_add(i64::from(self.nanoseconds / 1_000_000)),
        )
    }
}

/// The allocation a sample belongs to. Unavailable samples taken before an allocation existed
/// have none and count only in coverage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleAllocation {
    pub allocation_id: AllocationId,
    pub environment_id: EnvironmentId,
    pub provider_type: String,
    /// The start of the compute incarnation that produced the sample; `None` when unknown
    /// (for example an unavailable sample of a sleeping allocation).
    pub compute_started_at: Option<ComputeStart>,
}

/// The values of an observed sample. Each is `None` when the provider did not report it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleReadings {
    /// Cumulative CPU seconds of the compute incarnation (Docker, microsandbox).
    pub cpu_seconds_total: Option<f64>,
    /// Provider-reported share of the capacity (E2B); not clamped.
    pub utilization_ratio: Option<f64>,
    /// Configured CPU capacity, greater than zero.
    pub capacity_cores: Option<f64>,
    pub memory_usage_bytes: Option<u64>,
    /// At least 1; `None` when unknown or unlimited.
    pub memory_limit_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SampleStatus {
    Observed { readings: SampleReadings },
    Unavailable { reason: Reason },
}

/// Measured Session usage: cumulative model tokens over every recorded root Turn snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// One stored runtime sample of a Session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeSample {
    pub sampled_at: Timestamp,
    pub allocation: Option<SampleAllocation>,
    pub status: SampleStatus,
    /// The Session's measured usage when the sample was taken, if Core had any.
    pub token_usage: Option<TokenUsage>,
}

impl RuntimeSample {
    pub fn readings(&self) -> Option<&SampleReadings> {
        match &self.status {
            SampleStatus::Observed { readings } => Some(readings),
            SampleStatus::Unavailable { .. } => None,
        }
    }

    pub fn is_observed(&self) -> bool {
        matches!(self.status, SampleStatus::Observed { .. })
    }
}
