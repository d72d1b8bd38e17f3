//! Sandbox node host telemetry: CPU utilization between two heartbeats of one connection, the
//! `host` object, and node history in complete UTC buckets.
//!
//! Readings of the spec that it left open:
//! - Busy ticks are every aggregate tick except idle and iowait: user, nice, system, irq,
//!   softirq and steal. guest and guest_nice are left out because user and nice already
//!   include them. Two snapshots with no elapsed ticks give null (nothing was measured).
//! - `host` and history times render as RFC 3339 UTC with whole seconds (`…T09:00:00Z`).
//! - History covers the `range / resolution` complete buckets that end where the bucket in
//!   progress at `now` starts (60, 72 or 96 points).
//! - An observation whose available memory exceeds its total memory gives no used-memory value.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;

use super::wire::nullable;
use crate::query::Query;
use crate::{Timestamp, ValidationError};

/// The aggregate `cpu` line of `/proc/stat`, in USER_HZ ticks. Missing fields read 0, so a
/// heartbeat from a daemon that sends fewer columns still parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcStatCpu {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

impl ProcStatCpu {
    /// Parses the aggregate line (`cpu  user nice system idle …`) out of the whole file or the
    /// line itself. Older kernels print fewer columns; the missing ones read 0.
    pub fn parse(proc_stat: &str) -> Option<Self> {
        let line = proc_stat.lines().find(|l| l.split_whitespace().next() == Some("cpu"))?;
        let values: Vec<u64> =
            line.split_whitespace().skip(1).map(str::parse).collect::<Result<_, _>>().ok()?;
        if values.len() < 4 {
            return None;
        }
        let at = |i: usize| values.get(i).copied().unwrap_or(0);
        Some(Self {
            user: at(0),
            nice: at(1),
            system: at(2),
            idle: at(3),
            iowait: at(4),
            irq: at(5),
            softirq: at(6),
            steal: at(7),
            guest: at(8),
            guest_nice: at(9),
        })
    }

    fn fields(&self) -> [u64; 10] {
        [
            self.user,
            self.nice,
            self.system,
            self.idle,
            self.iowait,
            self.irq,
            self.softirq,
            self.steal,
            self.guest,
            self.guest_nice,
        ]
    }

    fn busy(&self) -> u128 {
        [self.user, self.nice, self.system, self.irq, self.softirq, self.steal]
            .iter()
            .map(|v| u128::from(*v))
            .sum()
    }

    fn idle_total(&self) -> u128 {
        u128::from(self.idle) + u128::from(self.iowait)
    }
}

/// The CPU counters of one heartbeat and the daemon connection that sent it. `stat` is `None`
/// when the node could not read `/proc/stat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuCounters {
    pub connection_id: String,
    pub stat: Option<ProcStatCpu>,
}

/// The share of busy ticks between two heartbeats, 0 to 1. Null on the first heartbeat of a
/// connection (no previous one, or the previous came on another connection), an unreadable
/// baseline or current snapshot, or a counter reset (any counter went down).
pub fn host_cpu_utilization(previous: Option<&CpuCounters>, current: &CpuCounters) -> Option<f64> {
    let previous = previous.filter(|p| p.connection_id == current.connection_id)?;
    let (before, after) = (previous.stat?, current.stat?);
    if before.fields().iter().zip(after.fields()).any(|(b, a)| a < *b) {
        return None;
    }
    let busy = after.busy() - before.busy();
    let total = busy + (after.idle_total() - before.idle_total());
    if total == 0 {
        return None;
    }
    Some((busy as f64 / total as f64).clamp(0.0, 1.0))
}

/// What one heartbeat recorded about the host; every value `None` when unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NodeObservation {
    pub observed_at: Timestamp,
    pub effective_cpu_cores: Option<f64>,
    pub cpu_utilization: Option<f64>,
    pub total_memory_bytes: Option<u64>,
    pub available_memory_bytes: Option<u64>,
    pub available_disk_bytes: Option<u64>,
}

impl NodeObservation {
    /// Total minus available memory of this same observation.
    pub fn used_memory_bytes(&self) -> Option<u64> {
        self.total_memory_bytes?.checked_sub(self.available_memory_bytes?)
    }
}

/// The `host` object: the last received heartbeat observation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostObservation {
    #[serde(deserialize_with = "nullable")]
    pub effective_cpu_cores: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pub cpu_utilization: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pub total_memory_bytes: Option<u64>,
    #[serde(deserialize_with = "nullable")]
    pub available_memory_bytes: Option<u64>,
    #[serde(deserialize_with = "nullable")]
    pub available_disk_bytes: Option<u64>,
    #[serde(deserialize_with = "nullable")]
    pub observed_at: Option<String>,
}

/// The `host` object of a node whose last heartbeat is `last` (all null before the first one).
pub fn host_observation(last: Option<&NodeObservation>) -> HostObservation {
    HostObservation {
        effective_cpu_cores: last.and_then(|o| o.effective_cpu_cores),
        cpu_utilization: last.and_then(|o| o.cpu_utilization),
        total_memory_bytes: last.and_then(|o| o.total_memory_bytes),
        available_memory_bytes: last.and_then(|o| o.available_memory_bytes),
        available_disk_bytes: last.and_then(|o| o.available_disk_bytes),
        observed_at: last.map(|o| rfc3339_seconds(o.observed_at.unix_seconds())),
    }
}

/// `range` of the node read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NodeRange {
    #[default]
    OneHour,
    SixHours,
    OneDay,
}

impl NodeRange {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "1h" => Some(Self::OneHour),
            "6h" => Some(Self::SixHours),
            "24h" => Some(Self::OneDay),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::OneHour => "1h",
            Self::SixHours => "6h",
            Self::OneDay => "24h",
        }
    }

    pub fn seconds(self) -> i64 {
        match self {
            Self::OneHour => 3600,
            Self::SixHours => 6 * 3600,
            Self::OneDay => 24 * 3600,
        }
    }

    /// 60 s for 1h, 300 s for 6h, 900 s for 24h.
    pub fn resolution_seconds(self) -> i64 {
        match self {
            Self::OneHour => 60,
            Self::SixHours => 300,
            Self::OneDay => 900,
        }
    }

    pub fn bucket_count(self) -> usize {
        (self.seconds() / self.resolution_seconds()) as usize
    }

    /// The node read's query: only `range`, at most once, one of 1h, 6h, 24h (default 1h). Every
    /// violation is a 400 `invalid_request`.
    pub fn from_query(query: &Query) -> Result<Self, ValidationError> {
        if let Some(name) = query.names().find(|n| *n != "range") {
            return Err(ValidationError::new(name, format!("`{name}` is not a parameter of this route")));
        }
        match query.single("range")? {
            None => Ok(Self::default()),
            Some(text) => Self::parse(text)
                .ok_or_else(|| ValidationError::new("range", "`range` must be one of 1h, 6h, 24h")),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeHistory {
    pub resolution_seconds: i64,
    pub points: Vec<NodeHistoryPoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeHistoryPoint {
    pub start: String,
    #[serde(deserialize_with = "nullable")]
    pub cpu_utilization_max: Option<f64>,
    #[serde(deserialize_with = "nullable")]
    pub memory_used_bytes_max: Option<u64>,
    #[serde(deserialize_with = "nullable")]
    pub available_disk_bytes_min: Option<u64>,
}

/// Start (Unix seconds) of the first complete bucket of `range` at `now`.
pub fn node_history_start(range: NodeRange, now: Timestamp) -> i64 {
    let width = range.resolution_seconds();
    now.unix_seconds().div_euclid(width) * width - range.seconds()
}

/// Node history: every complete UTC bucket of the range, the bucket in progress left out; maxima
/// and minima of the recorded observations; null where a bucket has no recorded value.
pub fn node_history(range: NodeRange, now: Timestamp, observations: &[NodeObservation]) -> NodeHistory {
    let width = range.resolution_seconds();
    let first = node_history_start(range, now);
    let mut points: Vec<(Option<f64>, Option<u64>, Option<u64>)> =
        vec![(None, None, None); range.bucket_count()];
    for o in observations {
        let offset = o.observed_at.unix_seconds() - first;
        if offset < 0 {
            continue;
        }
        let Some(point) = usize::try_from(offset / width).ok().and_then(|i| points.get_mut(i)) else {
            continue;
        };
        if let Some(cpu) = o.cpu_utilization.filter(|c| c.is_finite()) {
            point.0 = Some(point.0.map_or(cpu, |m| m.max(cpu)));
        }
        if let Some(used) = o.used_memory_bytes() {
            point.1 = Some(point.1.map_or(used, |m| m.max(used)));
        }
        if let Some(disk) = o.available_disk_bytes {
            point.2 = Some(point.2.map_or(disk, |m| m.min(disk)));
        }
    }
    NodeHistory {
        resolution_seconds: width,
        points: points
            .into_iter()
            .enumerate()
            .map(|(i, (cpu, memory, disk))| NodeHistoryPoint {
                start: rfc3339_seconds(first + i as i64 * width),
                cpu_utilization_max: cpu,
                memory_used_bytes_max: memory,
                available_disk_bytes_min: disk,
            })
            .collect(),
    }
}

/// RFC 3339 in UTC with whole seconds, e.g. `2026-09-25T09:00:00Z`.
pub fn rfc3339_seconds(unix_seconds: i64) -> String {
    let format = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    OffsetDateTime::from_unix_timestamp(unix_seconds)
        .ok()
        .and_then(|t| t.format(format).ok())
        .unwrap_or_default()
}

/// Unix seconds of an RFC 3339 time; `None` when it does not parse or has a fraction of a second.
pub fn parse_rfc3339_seconds(text: &str) -> Option<i64> {
    let t = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    (t.nanosecond() == 0).then(|| t.unix_timestamp())
}

#[cfg(test)]
mod tests;
