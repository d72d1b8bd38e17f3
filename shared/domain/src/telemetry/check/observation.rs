//! Observation rules: which combinations of mode, status, reason and fields are valid.

use std::collections::BTreeSet;

use super::{CheckError, bytes, ensure, fail, number, seconds};
use crate::session::EnvironmentMode;
use crate::telemetry::observation_wire::*;
use crate::telemetry::sample::Reason;

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
