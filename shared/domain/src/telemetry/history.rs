//! Builds the `agent.runtime_history` response from stored samples.
//!
//! Readings of the spec that it left open, chosen as an operator would expect:
//! - Only samples in `[retained_start, end)` are counted anywhere (coverage, series, token usage),
//!   so `sample_count` is comparable with `expected_sample_count` even while storage still holds
//!   samples past their seven-day TTL.
//! - The caller may pass samples from before the window (for example one sampling interval before
//!   `start`): they are never counted, but serve as the CPU baseline of an interval that ends in
//!   the first bucket.
//! - A bucket's `first_observed_at`/`last_observed_at` are the times of its first and last sample
//!   of any status (every sample is an observation attempt).
//! - Consecutive counters of one incarnation form an interval even when unavailable samples lie
//!   between them; the interval's ratio is an average over it, never a value for the gap's buckets.
//!   Two counters belong to one incarnation when their `compute_started_at` are equal (both unknown
//!   counts as equal; a decreasing counter still resets the baseline).
//! - An interval's capacity is that of its later sample, else of its baseline.
//! - Should one allocation report both cumulative counters and ratios, a bucket with a counter
//!   interval uses the intervals; the ratios are used only where there is none.
//! - `memory` is the last sample in the bucket that reported any memory value, both fields from
//!   that one sample so usage and limit stay consistent.
//! - Series are ordered by their first retained sample, then by `allocation_id`.

use std::collections::BTreeMap;

use thiserror::Error;

use super::history_query::{BucketPlan, HistoryQuery, MAX_SAFE_INTEGER, SamplingInterval, ceil_div};
use super::history_wire::*;
use super::ids::{AllocationId, EnvironmentId};
use super::sample::{ComputeStart, RuntimeSample, SampleReadings};
use crate::{SessionId, Timestamp};

/// How long runtime samples are kept.
pub const SAMPLE_RETENTION_SECONDS: i64 = 7 * 24 * 60 * 60;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HistoryError {
    /// Samples of one allocation disagree on its environment or provider.
    #[error("stored samples of allocation {0} disagree on its identity")]
    InconsistentIdentity(AllocationId),
    /// A stored number is not finite, negative, or a capacity is not positive.
    #[error("a stored runtime sample holds an invalid value")]
    InvalidSample,
    /// More than 64 series or 10,000 coverage and series points.
    #[error("the history exceeds the response limits")]
    TooLarge,
}

impl HistoryError {
    /// The status the Core route answers.
    pub fn status(&self) -> u16 {
        match self {
            Self::InconsistentIdentity(_) => 500,
            Self::InvalidSample | Self::TooLarge => 503,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::InconsistentIdentity(_) => "internal_error",
            Self::InvalidSample | Self::TooLarge => "runtime_history_unavailable",
        }
    }
}

/// The earliest second history can still hold at `generated_at`.
pub fn retained_start(query: HistoryQuery, generated_at: Timestamp) -> i64 {
    query.start().max(generated_at.unix_seconds().saturating_sub(SAMPLE_RETENTION_SECONDS))
}

/// Sampling intervals between `retained_start` and `end`, rounded up; 0 when nothing is retained.
pub fn expected_sample_count(retained_start: i64, end: i64, interval: SamplingInterval) -> u64 {
    u64::try_from(ceil_div((end - retained_start).max(0), interval.seconds())).unwrap_or(0)
}

#[derive(Default)]
struct Counts {
    first: Option<Timestamp>,
    last: Option<Timestamp>,
    observed: u64,
    unavailable: u64,
}

impl Counts {
    fn add(&mut self, sample: &RuntimeSample) {
        self.first = Some(self.first.map_or(sample.sampled_at, |f| f.min(sample.sampled_at)));
        self.last = Some(self.last.map_or(sample.sampled_at, |l| l.max(sample.sampled_at)));
        if sample.is_observed() {
            self.observed += 1;
        } else {
            self.unavailable += 1;
        }
    }

    fn total(&self) -> u64 {
        self.observed + self.unavailable
    }
}

#[derive(Default)]
struct PointAcc {
    counts: Counts,
    consumed_seconds: f64,
    capacity_seconds: f64,
    intervals: u64,
    ratio_sum: f64,
    ratios: u64,
    capacity: Option<f64>,
    memory: Option<(Option<u64>, Option<u64>)>,
    memory_contributors: u64,
}

struct Baseline {
    at: Timestamp,
    incarnation: Option<ComputeStart>,
    total: f64,
    capacity: Option<f64>,
}

struct SeriesAcc {
    environment_id: EnvironmentId,
    provider_type: String,
    started_at: Option<ComputeStart>,
    first_retained: Option<Timestamp>,
    baseline: Option<Baseline>,
    points: BTreeMap<usize, PointAcc>,
}

/// Builds the history of one Session. `samples` may be in any order; ties keep input order.
pub fn build_runtime_history(
    session_id: SessionId,
    query: HistoryQuery,
    interval: SamplingInterval,
    generated_at: Timestamp,
    samples: &[RuntimeSample],
) -> Result<RuntimeHistory, HistoryError> {
    let plan = BucketPlan::new(query, interval);
    let retained_start = retained_start(query, generated_at);
    let mut sorted: Vec<&RuntimeSample> = samples.iter().collect();
    sorted.sort_by_key(|s| s.sampled_at);

    let in_window = |s: &RuntimeSample| -> Option<usize> {
        (s.sampled_at >= Timestamp::from_unix_seconds(retained_start))
            .then(|| plan.index_of(s.sampled_at))
            .flatten()
    };

    let mut coverage: BTreeMap<usize, Counts> = BTreeMap::new();
    let mut total = Counts::default();
    let mut tokens: BTreeMap<usize, &RuntimeSample> = BTreeMap::new();
    let mut series: BTreeMap<AllocationId, SeriesAcc> = BTreeMap::new();

    for sample in sorted.iter().copied().filter(|s| s.sampled_at < Timestamp::from_unix_seconds(query.end()))
    {
        if let Some(readings) = sample.readings() {
            check_readings(readings)?;
        }
        if let Some(usage) = sample.token_usage
            && !(safe(Some(usage.input_tokens)) && safe(Some(usage.output_tokens)))
        {
            return Err(HistoryError::InvalidSample);
        }
        let bucket = in_window(sample);
        if let Some(index) = bucket {
            total.add(sample);
            coverage.entry(index).or_default().add(sample);
            if sample.token_usage.is_some() {
                tokens.insert(index, sample);
            }
        }
        let Some(allocation) = &sample.allocation else { continue };
        let acc = series.entry(allocation.allocation_id).or_insert_with(|| SeriesAcc {
            environment_id: allocation.environment_id,
            provider_type: allocation.provider_type.clone(),
            started_at: None,
            first_retained: None,
            baseline: None,
            points: BTreeMap::new(),
        });
        if acc.environment_id != allocation.environment_id || acc.provider_type != allocation.provider_type {
            return Err(HistoryError::InconsistentIdentity(allocation.allocation_id));
        }
        let interval = advance_baseline(&mut acc.baseline, sample, allocation.compute_started_at);
        let Some(index) = bucket else { continue };
        acc.first_retained.get_or_insert(sample.sampled_at);
        if let Some(start) = allocation.compute_started_at {
            acc.started_at = Some(acc.started_at.map_or(start, |s| s.min(start)));
        }
        let point = acc.points.entry(index).or_default();
        point.counts.add(sample);
        if let Some((consumed, capacity_seconds)) = interval {
            point.consumed_seconds += consumed;
            point.capacity_seconds += capacity_seconds;
            point.intervals += 1;
        }
        if let Some(readings) = sample.readings() {
            if let Some(ratio) = readings.utilization_ratio {
                point.ratio_sum += ratio;
                point.ratios += 1;
            }
            if readings.capacity_cores.is_some() {
                point.capacity = readings.capacity_cores;
            }
            // A limit beyond JSON's safe integers is an unlimited cgroup: unknown, so null.
            let limit = readings.memory_limit_bytes.filter(|l| *l <= MAX_SAFE_INTEGER as u64);
            if readings.memory_usage_bytes.is_some() || limit.is_some() {
                point.memory = Some((readings.memory_usage_bytes, limit));
                point.memory_contributors += 1;
            }
        }
    }

    let coverage_buckets: Vec<CoverageBucket> = coverage
        .into_iter()
        .map(|(index, counts)| {
            let (start, end) = plan.bounds(index);
            CoverageBucket {
                start,
                end,
                first_observed_at: counts.first.map_or(start, Timestamp::unix_seconds),
                last_observed_at: counts.last.map_or(start, Timestamp::unix_seconds),
                observation_count: counts.total(),
                observed_count: counts.observed,
                unavailable_count: counts.unavailable,
            }
        })
        .collect();

    let mut retained_series: Vec<(Timestamp, AllocationId, SeriesAcc)> =
        series.into_iter().filter_map(|(id, acc)| acc.first_retained.map(|first| (first, id, acc))).collect();
    retained_series.sort_by_key(|(first, id, _)| (*first, *id));
    if retained_series.len() > MAX_SERIES {
        return Err(HistoryError::TooLarge);
    }
    let series: Vec<RuntimeSeries> = retained_series
        .into_iter()
        .map(|(_, allocation_id, acc)| RuntimeSeries {
            allocation_id,
            environment_id: acc.environment_id,
            provider_type: acc.provider_type,
            started_at: acc.started_at,
            points: acc.points.into_iter().map(|(index, point)| series_point(&plan, index, &point)).collect(),
        })
        .collect();
    let total_points = coverage_buckets.len() + series.iter().map(|s| s.points.len()).sum::<usize>();
    if total_points > MAX_TOTAL_POINTS {
        return Err(HistoryError::TooLarge);
    }

    let token_usage = tokens
        .into_iter()
        .filter_map(|(index, sample)| {
            let usage = sample.token_usage?;
            let (start, end) = plan.bounds(index);
            Some(TokenUsagePoint {
                start,
                end,
                sampled_at: sample.sampled_at.unix_seconds(),
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
            })
        })
        .collect();

    Ok(RuntimeHistory {
        object: HISTORY_OBJECT.to_owned(),
        source: HISTORY_SOURCE.to_owned(),
        session_id,
        requested_range: RequestedRange { start: query.start(), end: query.end() },
        resolution_seconds: plan.width(),
        generated_at: generated_at.unix_seconds(),
        coverage: Coverage {
            retained_start,
            first_sample_at: total.first.map(Timestamp::unix_seconds),
            last_sample_at: total.last.map(Timestamp::unix_seconds),
            sample_count: total.total(),
            expected_sample_count: expected_sample_count(retained_start, query.end(), interval),
            buckets: coverage_buckets,
        },
        series,
        token_usage,
    })
}

/// Moves the allocation's CPU baseline to `sample` and returns the interval that ends at it, as
/// (CPU seconds consumed, elapsed seconds × capacity), when there is one.
fn advance_baseline(
    baseline: &mut Option<Baseline>,
    sample: &RuntimeSample,
    incarnation: Option<ComputeStart>,
) -> Option<(f64, f64)> {
    let readings = sample.readings()?;
    let total = readings.cpu_seconds_total?;
    let previous = baseline.replace(Baseline {
        at: sample.sampled_at,
        incarnation,
        total,
        capacity: readings.capacity_cores,
    })?;
    if previous.incarnation != incarnation || total < previous.total || sample.sampled_at <= previous.at {
        return None;
    }
    let capacity = readings.capacity_cores.or(previous.capacity)?;
    let elapsed = (sample.sampled_at.unix_millis() - previous.at.unix_millis()) as f64 / 1000.0;
    Some((total - previous.total, elapsed * capacity))
}

fn series_point(plan: &BucketPlan, index: usize, point: &PointAcc) -> SeriesPoint {
    let (start, end) = plan.bounds(index);
    let cpu = if point.intervals > 0 && point.capacity_seconds > 0.0 {
        Some((point.consumed_seconds / point.capacity_seconds, point.intervals))
    } else if point.ratios > 0 {
        Some((point.ratio_sum / point.ratios as f64, point.ratios))
    } else {
        None
    };
    SeriesPoint {
        start,
        end,
        observation_count: point.counts.total(),
        observed_count: point.counts.observed,
        unavailable_count: point.counts.unavailable,
        cpu: cpu.map(|(utilization_ratio, contributor_count)| CpuPoint {
            utilization_ratio,
            capacity_cores: point.capacity,
            contributor_count,
        }),
        memory: point.memory.map(|(usage_bytes, limit_bytes)| MemoryPoint {
            usage_bytes,
            limit_bytes,
            contributor_count: point.memory_contributors,
        }),
    }
}

fn safe(value: Option<u64>) -> bool {
    value.is_none_or(|v| v <= MAX_SAFE_INTEGER as u64)
}

fn check_readings(readings: &SampleReadings) -> Result<(), HistoryError> {
    let nonnegative = |v: Option<f64>| v.is_none_or(|v| v.is_finite() && v >= 0.0);
    let ok = nonnegative(readings.cpu_seconds_total)
        && nonnegative(readings.utilization_ratio)
        && readings.capacity_cores.is_none_or(|c| c.is_finite() && c > 0.0)
        && readings.memory_limit_bytes != Some(0)
        && safe(readings.memory_usage_bytes);
    if ok { Ok(()) } else { Err(HistoryError::InvalidSample) }
}

#[cfg(test)]
mod tests;
