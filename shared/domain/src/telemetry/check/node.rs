//! Node rules: host values and complete, aligned history buckets.

use super::{CheckError, ensure, fail, safe};
use crate::telemetry::node::{HostObservation, NodeHistory, NodeRange, parse_rfc3339_seconds};

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
