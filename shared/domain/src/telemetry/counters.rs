//! The latest usage counters of one sandbox that serves a managed allocation, as Core keeps them:
//! what the local observation source turns into a provider sample. A node reports raw counters
//! with every heartbeat; [`SandboxCounters::from_report`] applies the field rules (JSON-safe
//! integers, a limit of at least one byte, a positive capacity) and the incarnation identity.

use serde::{Deserialize, Serialize};

use super::history_query::MAX_SAFE_INTEGER;
use super::sample::ComputeStart;
use crate::Timestamp;
use crate::sandbox::host::SandboxUsage;
use crate::sandbox::{Sandbox, SandboxState};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxCounters {
    pub sandbox_id: String,
    /// Cumulative CPU seconds of the current compute incarnation.
    pub cpu_seconds_total: Option<f64>,
    pub memory_usage_bytes: Option<u64>,
    /// `None` when unknown or unlimited.
    pub memory_limit_bytes: Option<u64>,
    pub capacity_cores: Option<f64>,
    /// When the current compute incarnation started; a new value is a new incarnation.
    pub compute_started_at: Option<ComputeStart>,
    /// Whether the compute is running (false: paused, ended, or missing from its node).
    #[serde(default = "running_default")]
    pub running: bool,
    pub reported_at: Timestamp,
}

fn running_default() -> bool {
    true
}

fn safe(value: Option<u64>) -> Option<u64> {
    value.filter(|v| i64::try_from(*v).is_ok_and(|v| v <= MAX_SAFE_INTEGER))
}

fn finite_nonnegative(value: Option<f64>) -> Option<f64> {
    value.filter(|v| v.is_finite() && *v >= 0.0)
}

impl SandboxCounters {
    /// What a node reported for `sandbox` (`None`: the node no longer has it) in a heartbeat
    /// measured at `observed_at` and received at `now`. The capacity is the sandbox's CPU
    /// quota, else its node's effective cores; the incarnation is the sandbox's: its counters
    /// live in one cgroup from creation to end, across daemon restarts.
    pub fn from_report(
        sandbox: &Sandbox,
        usage: Option<&SandboxUsage>,
        node_cores: Option<f64>,
        observed_at: Timestamp,
        now: Timestamp,
    ) -> Self {
        let alive = sandbox.lifecycle.effective(now) == SandboxState::Running;
        let positive = |v: Option<f64>| finite_nonnegative(v).filter(|v| *v > 0.0);
        Self {
            sandbox_id: sandbox.id.as_str().to_owned(),
            cpu_seconds_total: finite_nonnegative(usage.and_then(|u| u.cpu_seconds)),
            memory_usage_bytes: safe(usage.and_then(|u| u.memory_bytes)),
            memory_limit_bytes: safe(usage.and_then(|u| u.memory_limit_bytes)).filter(|l| *l >= 1),
            capacity_cores: positive(usage.and_then(|u| u.cpu_limit_cores)).or(positive(node_cores)),
            compute_started_at: Some(ComputeStart::from_timestamp(sandbox.started_at)),
            running: alive && usage.is_some(),
            // A node's clock may run ahead of Core's; a sample is never from the future.
            reported_at: observed_at.min(now),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::ProjectId;
    use crate::sandbox::{Lifecycle, SandboxId};

    fn sandbox(started_ms: i64) -> Sandbox {
        let start = Timestamp::from_unix_millis(started_ms);
        Sandbox {
            id: SandboxId::from_random([7; 16]),
            project_id: ProjectId::from_random([1; 16]),
            node_id: "7b0c6a3e-0e7a-4b8e-9d7e-2f3c4d5e6f70".parse().expect("node id"),
            started_at: start,
            lifecycle: Lifecycle::start(start, 3600),
            metadata: Default::default(),
            env_vars: BTreeMap::new(),
            isolation: BTreeMap::new(),
            session_id: None,
            envd_token_sealed: None,
        }
    }

    fn usage(limit: Option<u64>, quota: Option<f64>) -> SandboxUsage {
        SandboxUsage {
            sandbox_id: SandboxId::from_random([7; 16]),
            cpu_seconds: Some(12.5),
            memory_bytes: Some(4096),
            memory_limit_bytes: limit,
            cpu_limit_cores: quota,
        }
    }

    #[test]
    fn counters_keep_the_values_and_the_sandbox_start_as_incarnation() {
        let s = sandbox(1_789_951_200_250);
        let now = Timestamp::from_unix_millis(1_789_951_300_000);
        let c = SandboxCounters::from_report(&s, Some(&usage(Some(1 << 30), Some(1.0))), Some(2.0), now, now);
        assert_eq!(c.cpu_seconds_total, Some(12.5));
        assert_eq!(c.memory_usage_bytes, Some(4096));
        assert_eq!(c.memory_limit_bytes, Some(1 << 30));
        assert_eq!(c.capacity_cores, Some(1.0));
        assert_eq!(c.compute_started_at, ComputeStart::new(1_789_951_200, 250_000_000));
        assert!(c.running);
        assert_eq!(c.reported_at, now);
    }

    #[test]
    fn unlimited_or_unsafe_limits_are_null_and_capacity_falls_back_to_the_node() {
        let s = sandbox(0);
        let now = Timestamp::from_unix_millis(10_000);
        // cgroup v1's "unlimited" is 2^63 rounded down to a page: not a JSON-safe integer.
        let c = SandboxCounters::from_report(
            &s,
            Some(&usage(Some(9_223_372_036_854_771_712), None)),
            Some(2.0),
            now,
            now,
        );
        assert_eq!(c.memory_limit_bytes, None);
        assert_eq!(c.capacity_cores, Some(2.0));
        let c = SandboxCounters::from_report(&s, Some(&usage(Some(0), Some(0.0))), None, now, now);
        assert_eq!(c.memory_limit_bytes, None);
        assert_eq!(c.capacity_cores, None);
    }

    #[test]
    fn a_missing_paused_or_ended_sandbox_is_not_running() {
        let mut s = sandbox(0);
        let now = Timestamp::from_unix_millis(10_000);
        assert!(!SandboxCounters::from_report(&s, None, None, now, now).running);
        s.lifecycle = s.lifecycle.pause(now).expect("pause");
        assert!(!SandboxCounters::from_report(&s, Some(&usage(None, None)), None, now, now).running);
        let late = Timestamp::from_unix_millis(3_600_001);
        let s = sandbox(0);
        assert!(!SandboxCounters::from_report(&s, Some(&usage(None, None)), None, late, late).running);
    }

    #[test]
    fn a_report_from_a_clock_ahead_is_dated_now() {
        let s = sandbox(0);
        let now = Timestamp::from_unix_millis(10_000);
        let ahead = Timestamp::from_unix_millis(70_000);
        let c = SandboxCounters::from_report(&s, Some(&usage(None, None)), None, ahead, now);
        assert_eq!(c.reported_at, now);
        let bad = SandboxUsage { cpu_seconds: Some(f64::NAN), ..usage(None, None) };
        assert_eq!(SandboxCounters::from_report(&s, Some(&bad), None, now, now).cpu_seconds_total, None);
    }
}
