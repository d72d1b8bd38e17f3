//! History rules: the echoed query, the bucket grid, order, totals, identity and limits.

use std::collections::{BTreeMap, BTreeSet};

use super::{CheckError, bytes, ensure, number, safe, seconds};
use crate::telemetry::history::retained_start;
use crate::telemetry::history_query::{
    HistoryQuery, MAX_RANGE_SECONDS, MAX_SAFE_INTEGER, MIN_BUCKET_SECONDS, ceil_div,
};
use crate::telemetry::history_wire::*;
use crate::telemetry::observation_wire::ByteUsage;
use crate::telemetry::sample::ComputeStart;
use crate::{SessionId, Timestamp};

/// The bucket grid a response must lie on, rebuilt from what the client asked and what the
/// server answered as its width.
struct Grid {
    start: i64,
    end: i64,
    width: i64,
}

impl Grid {
    fn check(&self, start: i64, end: i64) -> Result<i64, CheckError> {
        let on_grid = start >= self.start
            && start < self.end
            && (start - self.start) % self.width == 0
            && end == (start + self.width).min(self.end);
        ensure(on_grid, "a bucket is not on the requested grid")?;
        Ok((start - self.start) / self.width)
    }
}

fn increasing(indices: &[i64], what: &str) -> Result<(), CheckError> {
    ensure(indices.windows(2).all(|p| p[0] < p[1]), &format!("{what} buckets are not in increasing order"))
}

/// Checks a history response against the query that asked for it.
pub fn check_history(
    h: &RuntimeHistory,
    session_id: SessionId,
    query: HistoryQuery,
) -> Result<(), CheckError> {
    ensure(h.object == HISTORY_OBJECT, "object must be agent.runtime_history")?;
    ensure(h.source == HISTORY_SOURCE, "source must be durable")?;
    ensure(h.session_id == session_id, "session_id is not the requested Session")?;
    ensure(
        h.requested_range == RequestedRange { start: query.start(), end: query.end() },
        "requested_range differs",
    )?;
    ensure(seconds(h.generated_at), "generated_at is not a Unix second")?;
    ensure(h.generated_at.saturating_add(1) >= query.end(), "generated_at is before the requested end")?;
    let range = query.end() - query.start();
    let width = h.resolution_seconds;
    ensure(
        width >= MIN_BUCKET_SECONDS && width >= ceil_div(range, i64::from(query.max_points())),
        "resolution_seconds breaks the bucket width rule",
    )?;
    // Core samples more often than daily, so no width can exceed a day.
    ensure(width <= MAX_RANGE_SECONDS, "resolution_seconds is out of bounds")?;
    let grid = Grid { start: query.start(), end: query.end(), width };
    let max_points = query.max_points() as usize;

    let c = &h.coverage;
    let retained = retained_start(query, Timestamp::from_unix_seconds(h.generated_at));
    ensure(c.retained_start == retained, "retained_start is not the later of start and seven days ago")?;
    ensure(safe(c.sample_count) && safe(c.expected_sample_count), "a count is not a safe integer")?;
    if query.end() <= retained {
        ensure(c.expected_sample_count == 0, "expected_sample_count must be 0 when nothing is retained")?;
    } else {
        let at_least = u64::try_from(ceil_div(query.end() - retained, width)).unwrap_or(u64::MAX);
        ensure(c.expected_sample_count >= at_least, "expected_sample_count is too small for the resolution")?;
    }
    ensure(c.buckets.len() <= max_points, "coverage holds more than max_points buckets")?;
    let mut coverage_counts = BTreeMap::new();
    let mut indices = Vec::with_capacity(c.buckets.len());
    let mut total = 0u64;
    for b in &c.buckets {
        let index = grid.check(b.start, b.end)?;
        indices.push(index);
        ensure(
            b.observation_count >= 1
                && b.observation_count == b.observed_count.saturating_add(b.unavailable_count),
            "coverage bucket counts do not add up",
        )?;
        ensure(
            b.start.max(retained) <= b.first_observed_at
                && b.first_observed_at <= b.last_observed_at
                && b.last_observed_at < b.end,
            "coverage bucket sample times lie outside the bucket",
        )?;
        total = total.saturating_add(b.observation_count);
        coverage_counts.insert(index, b.observation_count);
    }
    increasing(&indices, "coverage")?;
    ensure(total == c.sample_count, "sample_count is not the sum of the coverage buckets")?;
    ensure(c.first_sample_at == c.buckets.first().map(|b| b.first_observed_at), "first_sample_at differs")?;
    ensure(c.last_sample_at == c.buckets.last().map(|b| b.last_observed_at), "last_sample_at differs")?;

    ensure(h.series.len() <= MAX_SERIES, "more than 64 series")?;
    let mut allocations = BTreeSet::new();
    let mut series_counts: BTreeMap<i64, u64> = BTreeMap::new();
    let mut points = c.buckets.len();
    for s in &h.series {
        ensure(allocations.insert(s.allocation_id), "an allocation has two series")?;
        ensure(!s.provider_type.is_empty(), "provider_type must not be empty")?;
        ensure(
            s.started_at.is_none_or(|t| {
                t.nanoseconds <= ComputeStart::MAX_NANOSECONDS && t.seconds.abs() <= MAX_SAFE_INTEGER
            }),
            "started_at is not {seconds, nanoseconds}",
        )?;
        ensure(
            !s.points.is_empty() && s.points.len() <= max_points,
            "a series must hold 1 to max_points points",
        )?;
        points = points.saturating_add(s.points.len());
        let mut indices = Vec::with_capacity(s.points.len());
        for p in &s.points {
            let index = grid.check(p.start, p.end)?;
            indices.push(index);
            ensure(
                p.observation_count >= 1
                    && p.observation_count == p.observed_count.saturating_add(p.unavailable_count),
                "series point counts do not add up",
            )?;
            let sum = series_counts.entry(index).or_default();
            *sum = sum.saturating_add(p.observation_count);
            if let Some(cpu) = &p.cpu {
                ensure(cpu.contributor_count >= 1, "cpu.contributor_count must be at least 1")?;
                ensure(
                    number(Some(cpu.utilization_ratio)),
                    "cpu.utilization_ratio must be finite and nonnegative",
                )?;
                ensure(
                    cpu.capacity_cores.is_none_or(|c| c.is_finite() && c > 0.0),
                    "cpu.capacity_cores must be greater than zero",
                )?;
                ensure(
                    cpu.contributor_count <= p.observed_count,
                    "more cpu contributors than observed samples",
                )?;
            }
            if let Some(m) = &p.memory {
                ensure(m.contributor_count >= 1, "memory.contributor_count must be at least 1")?;
                ensure(
                    m.contributor_count <= p.observed_count,
                    "more memory contributors than observed samples",
                )?;
                bytes(Some(&ByteUsage { usage_bytes: m.usage_bytes, limit_bytes: m.limit_bytes }), "memory")?;
            }
        }
        increasing(&indices, "series")?;
    }
    for (index, count) in &series_counts {
        ensure(
            coverage_counts.get(index).is_some_and(|covered| count <= covered),
            "series points count samples that coverage does not hold",
        )?;
    }
    ensure(points <= MAX_TOTAL_POINTS, "more than 10,000 coverage and series points")?;

    ensure(h.token_usage.len() <= max_points, "token_usage holds more than max_points points")?;
    let mut indices = Vec::with_capacity(h.token_usage.len());
    for t in &h.token_usage {
        let index = grid.check(t.start, t.end)?;
        indices.push(index);
        ensure(coverage_counts.contains_key(&index), "a token usage point lies in a bucket without samples")?;
        ensure(
            t.start.max(retained) <= t.sampled_at && t.sampled_at < t.end,
            "token usage sampled_at lies outside its bucket",
        )?;
        ensure(safe(t.input_tokens) && safe(t.output_tokens), "token counts are not safe integers")?;
    }
    increasing(&indices, "token_usage")
}
