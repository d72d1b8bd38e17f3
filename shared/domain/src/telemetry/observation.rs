//! The Runtime observation of one Session, from Core's stored records and the outcome of one
//! provider read. Which combinations of mode, status, reason and fields are valid is decided
//! here, once; `check::check_observation` verifies the same rules on a received object.
//!
//! Readings of the spec that it left open:
//! - An openai_hosted Session without an allocation record is `pending`/`allocation_pending`
//!   with kind `managed_allocation` and a null `allocation_id` (the allocation does not exist yet).
//! - `provider_type` is set only when Core read a provider (observed, provider-reported not
//!   running, timeout, sample unavailable): "null when no provider was read". It is null for a
//!   pending or stopped allocation and for `source_not_configured`.
//! - `started_at` comes from the provider sample, so it is null on rows without a sample.
//! - `allocation_created_at` is the allocation record's creation time, null without a record.
//! - A memory or disk limit above 2^53 - 1 (an unlimited cgroup) is reported as null.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::ids::{AllocationId, DeviceId, EnvironmentId};
use super::observation_wire::*;
use super::sample::{Reason, SampleReadings};
use crate::query::Query;
use crate::session::EnvironmentMode;
use crate::{SessionId, Timestamp, ValidationError};

/// The states of Core's allocation record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocationState {
    Pending,
    Creating,
    Running,
    Quiescing,
    Suspending,
    Suspended,
    Restoring,
    Waking,
    CleanupPending,
    Released,
}

impl AllocationState {
    /// The lifecycle table of the spec.
    pub fn lifecycle(self) -> LifecycleState {
        match self {
            Self::Pending | Self::Creating => LifecycleState::Pending,
            Self::Running => LifecycleState::Active,
            Self::Suspended => LifecycleState::Sleeping,
            Self::Quiescing | Self::Suspending | Self::Restoring | Self::Waking => {
                LifecycleState::Transitioning
            }
            Self::CleanupPending | Self::Released => LifecycleState::Stopped,
        }
    }
}

/// Core's record of a Session's managed allocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationRecord {
    pub allocation_id: AllocationId,
    pub device_id: Option<DeviceId>,
    pub provider_type: String,
    pub state: AllocationState,
    pub created_at: Timestamp,
}

/// A sample the provider returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSample {
    pub observed_at: Timestamp,
    /// When the current compute incarnation started, if the provider said.
    pub started_at: Option<Timestamp>,
    pub readings: SampleReadings,
    /// Disk usage and capacity (E2B); `None` for Docker and microsandbox.
    pub disk: Option<ByteUsage>,
}

/// The outcome of reading the allocation's provider.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderRead {
    Sampled(ProviderSample),
    /// The provider reports the Runtime absent, stopped or suspended.
    NotRunning,
    /// No observation source serves the allocation's provider.
    SourceNotConfigured,
    /// The read exceeded its deadline.
    Timeout,
    /// The provider could not produce a current sample.
    Unavailable,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ObservationError {
    /// The stored records contradict each other (environment missing or present against the
    /// mode, a managed record on an unmanaged Session).
    #[error("inconsistent runtime identity")]
    InconsistentIdentity,
    /// The provider returned a value outside the field rules.
    #[error("invalid provider evidence")]
    InvalidEvidence,
}

/// What Core knows about a Session before (and after) reading a provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservationRecords<'a> {
    pub session_id: SessionId,
    pub mode: EnvironmentMode,
    pub environment_id: Option<EnvironmentId>,
    pub allocation: Option<&'a AllocationRecord>,
}

/// The single read accepts no query parameters: any one is `unsupported_parameter`.
pub fn reject_query_parameters(query: &Query) -> Result<(), ValidationError> {
    match query.names().next() {
        None => Ok(()),
        Some(name) => Err(ValidationError::new(name, format!("`{name}` is not a parameter of this route"))),
    }
}

/// Runtime history exists only for openai_hosted Sessions; others answer 409
/// `runtime_history_unsupported`.
pub fn history_supported(mode: EnvironmentMode) -> bool {
    mode == EnvironmentMode::OpenaiHosted
}

/// Whether Core must read a provider for these records: only an openai_hosted allocation that is
/// not pending and not stopped.
pub fn needs_provider_read(records: &ObservationRecords<'_>) -> bool {
    records.mode == EnvironmentMode::OpenaiHosted
        && records.allocation.is_some_and(|a| {
            !matches!(a.state.lifecycle(), LifecycleState::Pending | LifecycleState::Stopped)
        })
}

/// Builds the observation (with disk, for list rows; drop it with `split` for the single read).
/// `read` is ignored when [`needs_provider_read`] is false; when it is true and `read` is `None`,
/// the row is `sample_unavailable`.
pub fn runtime_observation(
    records: &ObservationRecords<'_>,
    read: Option<&ProviderRead>,
    resolved_at: Timestamp,
) -> Result<AdminRuntimeObservation, ObservationError> {
    if !records.mode.admits(records.environment_id.as_ref())
        || (records.mode != EnvironmentMode::OpenaiHosted && records.allocation.is_some())
    {
        return Err(ObservationError::InconsistentIdentity);
    }
    let mut row = RuntimeObservation {
        id: records.session_id,
        object: OBSERVATION_OBJECT.to_owned(),
        session_id: records.session_id,
        environment_id: records.environment_id,
        mode: records.mode,
        provider_type: None,
        instance: RuntimeInstance {
            kind: InstanceKind::None,
            allocation_id: None,
            device_id: None,
            connection_generation: None,
        },
        lifecycle_state: None,
        status: ObservationStatus::Unsupported,
        reason: Some(Reason::RuntimeModeNotObservable),
        allocation_created_at: None,
        resolved_at: resolved_at.unix_seconds(),
        observed_at: None,
        started_at: None,
        cpu: None,
        memory: None,
    };
    match records.mode {
        EnvironmentMode::None => return Ok(row.with_disk(None)),
        EnvironmentMode::SelfHosted => {
            row.instance.kind = InstanceKind::SelfHostedConnection;
            return Ok(row.with_disk(None));
        }
        EnvironmentMode::OpenaiHosted => {}
    }
    row.instance.kind = InstanceKind::ManagedAllocation;
    row.status = ObservationStatus::Unavailable;
    let Some(allocation) = records.allocation else {
        row.lifecycle_state = Some(LifecycleState::Pending);
        row.reason = Some(Reason::AllocationPending);
        return Ok(row.with_disk(None));
    };
    let lifecycle = allocation.state.lifecycle();
    row.instance.allocation_id = Some(allocation.allocation_id);
    row.instance.device_id = allocation.device_id;
    row.lifecycle_state = Some(lifecycle);
    row.allocation_created_at = Some(allocation.created_at.unix_seconds());
    match lifecycle {
        LifecycleState::Pending => {
            row.reason = Some(Reason::AllocationPending);
            return Ok(row.with_disk(None));
        }
        LifecycleState::Stopped => {
            row.reason = Some(Reason::RuntimeNotRunning);
            return Ok(row.with_disk(None));
        }
        LifecycleState::Active | LifecycleState::Sleeping | LifecycleState::Transitioning => {}
    }
    let sample = match read {
        Some(ProviderRead::Sampled(sample)) => sample,
        other => {
            let reason = match other {
                Some(ProviderRead::NotRunning) => Reason::RuntimeNotRunning,
                Some(ProviderRead::SourceNotConfigured) => Reason::SourceNotConfigured,
                Some(ProviderRead::Timeout) => Reason::SampleTimeout,
                _ => Reason::SampleUnavailable,
            };
            if reason != Reason::SourceNotConfigured {
                row.provider_type = Some(allocation.provider_type.clone());
            }
            row.reason = Some(reason);
            return Ok(row.with_disk(None));
        }
    };
    row.provider_type = Some(allocation.provider_type.clone());
    row.status = ObservationStatus::Observed;
    row.reason = None;
    row.observed_at = Some(sample.observed_at.unix_seconds());
    row.started_at = sample.started_at.map(Timestamp::unix_seconds);
    row.cpu = cpu_of(&sample.readings)?;
    row.memory = bytes_of(sample.readings.memory_usage_bytes, sample.readings.memory_limit_bytes)?;
    let disk = match sample.disk {
        Some(disk) => bytes_of(disk.usage_bytes, disk.limit_bytes)?,
        None => None,
    };
    Ok(row.with_disk(disk))
}

fn cpu_of(readings: &SampleReadings) -> Result<Option<CpuObservation>, ObservationError> {
    let valid = |v: Option<f64>| v.is_none_or(|v| v.is_finite() && v >= 0.0);
    let capacity_ok = readings.capacity_cores.is_none_or(|c| c.is_finite() && c > 0.0);
    let one_kind = readings.cpu_seconds_total.is_none() || readings.utilization_ratio.is_none();
    if !(valid(readings.cpu_seconds_total) && valid(readings.utilization_ratio) && capacity_ok && one_kind) {
        return Err(ObservationError::InvalidEvidence);
    }
    let cpu = CpuObservation {
        usage_seconds_total: readings.cpu_seconds_total,
        capacity_cores: readings.capacity_cores,
        usage_cores: None,
        utilization_ratio: readings.utilization_ratio,
    };
    let any =
        cpu.usage_seconds_total.is_some() || cpu.capacity_cores.is_some() || cpu.utilization_ratio.is_some();
    Ok(any.then_some(cpu))
}

/// A limit beyond JSON's safe integers is how an unlimited cgroup reads: unknown, so null.
fn bytes_of(usage: Option<u64>, limit: Option<u64>) -> Result<Option<ByteUsage>, ObservationError> {
    let max = super::history_query::MAX_SAFE_INTEGER as u64;
    let limit = limit.filter(|l| *l <= max);
    if usage.is_some_and(|u| u > max) || limit == Some(0) {
        return Err(ObservationError::InvalidEvidence);
    }
    Ok((usage.is_some() || limit.is_some()).then_some(ByteUsage { usage_bytes: usage, limit_bytes: limit }))
}

#[cfg(test)]
mod tests;
