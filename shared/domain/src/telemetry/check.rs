//! Checks on received telemetry objects: the rules a client verifies before it trusts a response.
//! Serde (exact fields, enums, nullability, number types) is the first check; these are the rules
//! serde cannot express: combinations of mode, status and fields, ranges, order and totals.
//! The builders in this module tree always produce objects that pass them.

use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;

use super::history::retained_start;
use super::history_query::{HistoryQuery, MAX_RANGE_SECONDS, MAX_SAFE_INTEGER, MIN_BUCKET_SECONDS, ceil_div};
use super::history_wire::*;
use super::node::{HostObservation, NodeHistory, NodeRange, parse_rfc3339_seconds};
use super::observation_wire::*;
use super::sample::{ComputeStart, Reason};
use crate::session::EnvironmentMode;
use crate::{SessionId, Timestamp};

/// The first rule a received object breaks.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct CheckError(pub String);

fn fail<T>(message: impl Into<String>) -> Result<T, CheckError> {
    Err(CheckError(message.into()))
}

fn ensure(ok: bool, message: &str) -> Result<(), CheckError> {
    if ok { Ok(()) } else { fail(message) }
}

fn seconds(value: i64) -> bool {
    (0..=MAX_SAFE_INTEGER).contains(&value)
}

fn safe(value: u64) -> bool {
    value <= MAX_SAFE_INTEGER as u64
}

fn number(value: Option<f64>) -> bool {
    value.is_none_or(|v| v.is_finite() && v >= 0.0)
}

fn bytes(value: Option<&ByteUsage>, what: &str) -> Result<(), CheckError> {
    let Some(b) = value else { return Ok(()) };
    ensure(
        b.usage_bytes.is_none_or(safe) && b.limit_bytes.is_none_or(safe),
        &format!("{what} is not a safe integer"),
    )?;
    ensure(b.limit_bytes != Some(0), &format!("{what}.limit_bytes must be at least 1"))?;
    ensure(
        b.usage_bytes.is_some() || b.limit_bytes.is_some(),
        &format!("{what} has no value; it must be null"),
    )
}

/// Checks one observation. `disk` is `Some(..)` for a list row (which carries `disk`).
pub fn check_observation(o: &RuntimeObservation, disk: Option<Option<&ByteUsage>>) -> Result<(), CheckError> {
    ensure(o.object == OBSERVATION_OBJECT, "object must be agent.runtime_observation")?;
    ensure(o.id == o.session_id, "id must equal session_id")?;
    ensure(seconds(o.resolved_at), "resolved_at is not a Unix second")?;
    for t in [o.allocation_created_at, o.observed_at, o.started_at].into_iter().flatten() {
        ensure(seconds(t), "a timestamp is not a Unix second")?;
    }
    ensure(o.instance.connection_generation.is_none(), "connection_generation must be null")?;
    ensure(o.provider_type.as_deref().is_none_or(|p| !p.is_empty()), "provider_type must not be empty")?;
    if let Some(cpu) = &o.cpu {
        ensure(
            number(cpu.usage_seconds_total) && number(cpu.utilization_ratio) && number(cpu.capacity_cores),
            "cpu values must be finite nonnegative numbers",
        )?;
        ensure(cpu.capacity_cores.is_none_or(|c| c > 0.0), "cpu.capacity_cores must be greater than zero")?;
        ensure(cpu.usage_cores.is_none(), "cpu.usage_cores must be null")?;
        ensure(
            cpu.usage_seconds_total.is_none() || cpu.utilization_ratio.is_none(),
            "cpu reports both cumulative seconds and a ratio",
        )?;
        ensure(
            cpu.usage_seconds_total.is_some()
                || cpu.capacity_cores.is_some()
                || cpu.utilization_ratio.is_some(),
            "cpu has no value; it must be null",
        )?;
    }
    bytes(o.memory.as_ref(), "memory")?;
    let disk = disk.flatten();
    bytes(disk, "disk")?;

    let unobserved = o.observed_at.is_none()
        && o.started_at.is_none()
        && o.cpu.is_none()
        && o.memory.is_none()
        && disk.is_none();
    let unmanaged = |kind: InstanceKind| -> Result<(), CheckError> {
        ensure(o.instance.kind == kind, "instance.kind does not match the mode")?;
        ensure(
            o.instance.allocation_id.is_none() && o.instance.device_id.is_none(),
            "an unmanaged instance has no allocation or device",
        )?;
        ensure(o.provider_type.is_none(), "provider_type must be null for this mode")?;
        ensure(o.lifecycle_state.is_none(), "lifecycle_state must be null for this mode")?;
        ensure(o.status == ObservationStatus::Unsupported, "status must be unsupported for this mode")?;
        ensure(
            o.reason == Some(Reason::RuntimeModeNotObservable),
            "reason must be runtime_mode_not_observable",
        )?;
        ensure(o.allocation_created_at.is_none() && unobserved, "an unsupported row carries no sample values")
    };
    match o.mode {
        EnvironmentMode::None => {
            ensure(o.environment_id.is_none(), "environment_id must be null for mode none")?;
            unmanaged(InstanceKind::None)
        }
        EnvironmentMode::SelfHosted => {
            ensure(o.environment_id.is_some(), "environment_id must be set")?;
            unmanaged(InstanceKind::SelfHostedConnection)
        }
        EnvironmentMode::OpenaiHosted => {
            ensure(o.environment_id.is_some(), "environment_id must be set")?;
            ensure(
                o.instance.kind == InstanceKind::ManagedAllocation,
                "instance.kind must be managed_allocation",
            )?;
            let Some(lifecycle) = o.lifecycle_state else { return fail("lifecycle_state must be set") };
            let allocated = o.instance.allocation_id.is_some();
            ensure(allocated || o.instance.device_id.is_none(), "a device needs an allocation")?;
            ensure(
                allocated || o.allocation_created_at.is_none(),
                "allocation_created_at needs an allocation",
            )?;
            ensure(
                allocated || lifecycle == LifecycleState::Pending,
                "only a pending allocation may be missing",
            )?;
            ensure(
                (lifecycle == LifecycleState::Pending) == (o.reason == Some(Reason::AllocationPending)),
                "allocation_pending goes with lifecycle_state pending",
            )?;
            if lifecycle == LifecycleState::Stopped {
                ensure(
                    o.reason == Some(Reason::RuntimeNotRunning),
                    "a stopped allocation is runtime_not_running",
                )?;
            }
            match o.status {
                ObservationStatus::Observed => {
                    ensure(o.reason.is_none(), "an observed row has no reason")?;
                    ensure(o.observed_at.is_some(), "an observed row has observed_at")?;
                    ensure(
                        allocated && o.provider_type.is_some(),
                        "an observed row names its allocation and provider",
                    )
                }
                ObservationStatus::Unavailable => {
                    ensure(
                        o.reason.is_some_and(|r| r != Reason::RuntimeModeNotObservable),
                        "an unavailable row needs an unavailability reason",
                    )?;
                    ensure(unobserved, "an unavailable row carries no sample values")
                }
                ObservationStatus::Unsupported => fail("an openai_hosted row cannot be unsupported"),
            }
        }
    }
}

/// Checks a list page: every row, the list envelope and the page ids. One bad row fails the page.
pub fn check_observation_list(page: &RuntimeObservationList) -> Result<(), CheckError> {
    ensure(page.object == LIST_OBJECT, "object must be list")?;
    ensure(
        page.first_id == page.data.first().map(|r| r.observation.id),
        "first_id must be the first row's id",
    )?;
    ensure(page.last_id == page.data.last().map(|r| r.observation.id), "last_id must be the last row's id")?;
    ensure(page.data.len() <= 100, "a page holds at most 100 rows")?;
    let mut seen = BTreeSet::new();
    for (index, row) in page.data.iter().enumerate() {
        ensure(seen.insert(row.observation.id), "a Session appears twice in one page")?;
        let (observation, disk) = row.observation.clone().split();
        check_observation(&observation, Some(disk.as_ref()))
            .map_err(|e| CheckError(format!("data[{index}]: {e}")))?;
        if disk.is_some() {
            ensure(
                observation.status == ObservationStatus::Observed,
                "disk appears only on an observed row",
            )?;
        }
    }
    Ok(())
}

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

/// Checks the `host` object of a node read.
pub fn check_host(host: &HostObservation) -> Result<(), CheckError> {
    ensure(
        host.cpu_utilization.is_none_or(|c| c.is_finite() && (0.0..=1.0).contains(&c)),
        "cpu_utilization must be 0 to 1",
    )?;
    ensure(
        host.effective_cpu_cores.is_none_or(|c| c.is_finite() && c > 0.0),
        "effective_cpu_cores must be positive",
    )?;
    let values = [host.total_memory_bytes, host.available_memory_bytes, host.available_disk_bytes];
    ensure(values.iter().flatten().all(|v| safe(*v)), "host bytes must be safe integers")?;
    if let (Some(total), Some(available)) = (host.total_memory_bytes, host.available_memory_bytes) {
        ensure(available <= total, "available_memory_bytes exceeds total_memory_bytes")?;
    }
    match &host.observed_at {
        Some(at) => ensure(
            parse_rfc3339_seconds(at).is_some_and(|t| t >= 0),
            "host.observed_at is not an RFC 3339 time",
        ),
        None => ensure(
            values.iter().all(Option::is_none)
                && host.cpu_utilization.is_none()
                && host.effective_cpu_cores.is_none(),
            "a host without observed_at has no values",
        ),
    }
}

/// Checks node history against the requested range: the resolution, every complete bucket
/// present in order on the UTC grid, and the value bounds.
pub fn check_node_history(history: &NodeHistory, range: NodeRange) -> Result<(), CheckError> {
    let width = range.resolution_seconds();
    ensure(history.resolution_seconds == width, "resolution_seconds does not match the range")?;
    ensure(history.points.len() == range.bucket_count(), "history does not hold every bucket of the range")?;
    let mut previous: Option<i64> = None;
    for p in &history.points {
        let Some(start) = parse_rfc3339_seconds(&p.start) else {
            return fail("a point start is not an RFC 3339 time");
        };
        ensure(start >= 0 && start % width == 0, "a point start is not on the UTC bucket grid")?;
        ensure(
            previous.is_none_or(|prev| start == prev + width),
            "history points are not consecutive buckets",
        )?;
        previous = Some(start);
        ensure(
            p.cpu_utilization_max.is_none_or(|c| c.is_finite() && (0.0..=1.0).contains(&c)),
            "cpu_utilization_max must be 0 to 1",
        )?;
        ensure(
            p.memory_used_bytes_max.is_none_or(safe) && p.available_disk_bytes_min.is_none_or(safe),
            "history bytes must be safe integers",
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
