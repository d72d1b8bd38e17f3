use proptest::prelude::*;

use super::*;
use crate::telemetry::check::check_observation;

fn session() -> SessionId {
    SessionId::from_random([1; 16])
}

fn env() -> Option<EnvironmentId> {
    Some(EnvironmentId::from_random([2; 16]))
}

fn record(state: AllocationState) -> AllocationRecord {
    AllocationRecord {
        allocation_id: AllocationId::from_random([3; 16]),
        device_id: Some(DeviceId::from_random([4; 16])),
        provider_type: "docker".into(),
        state,
        created_at: Timestamp::from_unix_seconds(1_789_951_200),
    }
}

fn managed(allocation: Option<&AllocationRecord>) -> ObservationRecords<'_> {
    ObservationRecords {
        session_id: session(),
        mode: EnvironmentMode::OpenaiHosted,
        environment_id: env(),
        allocation,
    }
}

fn sampled() -> ProviderRead {
    ProviderRead::Sampled(ProviderSample {
        observed_at: Timestamp::from_unix_seconds(1_789_953_020),
        started_at: Some(Timestamp::from_unix_seconds(1_789_951_220)),
        readings: SampleReadings {
            cpu_seconds_total: Some(482.75),
            capacity_cores: Some(2.0),
            memory_usage_bytes: Some(805_306_368),
            memory_limit_bytes: Some(2_147_483_648),
            ..SampleReadings::default()
        },
        disk: None,
    })
}

const RESOLVED: Timestamp = Timestamp::from_unix_seconds(1_789_953_021);

fn observe(records: &ObservationRecords<'_>, read: Option<&ProviderRead>) -> AdminRuntimeObservation {
    let row = runtime_observation(records, read, RESOLVED).expect("builds");
    let (single, disk) = row.clone().split();
    check_observation(&single, Some(disk.as_ref())).expect("passes the client checks");
    row
}

#[test]
fn observation_lifecycle_table_maps_every_allocation_state() {
    use AllocationState::*;
    use LifecycleState as L;
    let table = [
        (Pending, L::Pending),
        (Creating, L::Pending),
        (Running, L::Active),
        (Suspended, L::Sleeping),
        (Quiescing, L::Transitioning),
        (Suspending, L::Transitioning),
        (Restoring, L::Transitioning),
        (Waking, L::Transitioning),
        (CleanupPending, L::Stopped),
        (Released, L::Stopped),
    ];
    for (state, lifecycle) in table {
        assert_eq!(state.lifecycle(), lifecycle, "{state:?}");
    }
}

#[test]
fn observation_of_an_observed_docker_runtime_matches_the_spec_example() {
    let alloc = record(AllocationState::Running);
    let records = managed(Some(&alloc));
    assert!(needs_provider_read(&records));
    let row = observe(&records, Some(&sampled()));
    let (single, disk) = row.split();
    assert_eq!(disk, None);
    let json = serde_json::to_value(&single).expect("serializes");
    assert_eq!(json["object"], "agent.runtime_observation");
    assert_eq!(json["status"], "observed");
    assert_eq!(json["reason"], serde_json::Value::Null);
    assert_eq!(json["lifecycle_state"], "active");
    assert_eq!(json["provider_type"], "docker");
    assert_eq!(json["instance"]["kind"], "managed_allocation");
    assert_eq!(json["instance"]["connection_generation"], serde_json::Value::Null);
    assert_eq!(json["observed_at"], 1_789_953_020);
    assert_eq!(json["started_at"], 1_789_951_220);
    assert_eq!(json["allocation_created_at"], 1_789_951_200);
    assert_eq!(
        json["cpu"],
        serde_json::json!({"usage_seconds_total": 482.75, "capacity_cores": 2.0, "usage_cores": null, "utilization_ratio": null})
    );
    assert_eq!(
        json["memory"],
        serde_json::json!({"usage_bytes": 805306368u64, "limit_bytes": 2147483648u64})
    );
    assert!(json.get("disk").is_none(), "the single read has no disk");
}

#[test]
fn observation_of_none_and_self_hosted_sessions_is_unsupported() {
    let none = ObservationRecords {
        session_id: session(),
        mode: EnvironmentMode::None,
        environment_id: None,
        allocation: None,
    };
    let row = observe(&none, None);
    assert_eq!(
        (row.status, row.reason),
        (ObservationStatus::Unsupported, Some(Reason::RuntimeModeNotObservable))
    );
    assert_eq!(
        (row.instance.kind, row.lifecycle_state, row.environment_id),
        (InstanceKind::None, None, None)
    );
    let hosted = ObservationRecords { mode: EnvironmentMode::SelfHosted, environment_id: env(), ..none };
    assert!(!needs_provider_read(&hosted));
    let row = observe(&hosted, Some(&sampled()));
    assert_eq!(row.instance.kind, InstanceKind::SelfHostedConnection);
    assert_eq!((row.status, row.provider_type, row.cpu), (ObservationStatus::Unsupported, None, None));
}

#[test]
fn observation_without_an_allocation_record_is_allocation_pending() {
    let row = observe(&managed(None), None);
    assert_eq!(row.lifecycle_state, Some(LifecycleState::Pending));
    assert_eq!((row.status, row.reason), (ObservationStatus::Unavailable, Some(Reason::AllocationPending)));
    assert_eq!(row.instance.allocation_id, None);
}

#[test]
fn observation_of_a_pending_or_stopped_allocation_never_reads_the_provider() {
    for (state, reason) in [
        (AllocationState::Creating, Reason::AllocationPending),
        (AllocationState::CleanupPending, Reason::RuntimeNotRunning),
        (AllocationState::Released, Reason::RuntimeNotRunning),
    ] {
        let alloc = record(state);
        let records = managed(Some(&alloc));
        assert!(!needs_provider_read(&records));
        let row = observe(&records, Some(&sampled()));
        assert_eq!(
            (row.status, row.reason, row.observed_at),
            (ObservationStatus::Unavailable, Some(reason), None)
        );
        assert_eq!(row.provider_type, None);
    }
}

#[test]
fn observation_reasons_follow_the_provider_read() {
    let alloc = record(AllocationState::Suspended);
    let records = managed(Some(&alloc));
    for (read, reason) in [
        (Some(ProviderRead::NotRunning), Reason::RuntimeNotRunning),
        (Some(ProviderRead::SourceNotConfigured), Reason::SourceNotConfigured),
        (Some(ProviderRead::Timeout), Reason::SampleTimeout),
        (Some(ProviderRead::Unavailable), Reason::SampleUnavailable),
        (None, Reason::SampleUnavailable),
    ] {
        let row = observe(&records, read.as_ref());
        assert_eq!((row.status, row.reason), (ObservationStatus::Unavailable, Some(reason)));
        assert_eq!(row.provider_type.is_some(), reason != Reason::SourceNotConfigured);
        assert_eq!((row.cpu, row.memory, row.disk, row.started_at), (None, None, None, None));
    }
}

#[test]
fn observation_of_e2b_reports_a_ratio_and_disk_on_list_rows() {
    let mut alloc = record(AllocationState::Running);
    alloc.provider_type = "e2b".into();
    let read = ProviderRead::Sampled(ProviderSample {
        observed_at: Timestamp::from_unix_seconds(1_789_953_020),
        started_at: None,
        readings: SampleReadings {
            utilization_ratio: Some(1.2),
            capacity_cores: Some(2.0),
            ..SampleReadings::default()
        },
        disk: Some(ByteUsage { usage_bytes: Some(10), limit_bytes: Some(100) }),
    });
    let row = observe(&managed(Some(&alloc)), Some(&read));
    assert_eq!(row.cpu.as_ref().and_then(|c| c.utilization_ratio), Some(1.2), "not clamped");
    assert_eq!(row.disk, Some(ByteUsage { usage_bytes: Some(10), limit_bytes: Some(100) }));
    assert_eq!(row.memory, None);
}

#[test]
fn observation_refuses_invalid_provider_evidence() {
    let alloc = record(AllocationState::Running);
    let bad = [
        SampleReadings { cpu_seconds_total: Some(-1.0), ..SampleReadings::default() },
        SampleReadings { capacity_cores: Some(0.0), ..SampleReadings::default() },
        SampleReadings { utilization_ratio: Some(f64::INFINITY), ..SampleReadings::default() },
        SampleReadings { memory_limit_bytes: Some(0), ..SampleReadings::default() },
        SampleReadings {
            cpu_seconds_total: Some(1.0),
            utilization_ratio: Some(0.5),
            ..SampleReadings::default()
        },
    ];
    for readings in bad {
        let read = ProviderRead::Sampled(ProviderSample {
            observed_at: RESOLVED,
            started_at: None,
            readings,
            disk: None,
        });
        assert_eq!(
            runtime_observation(&managed(Some(&alloc)), Some(&read), RESOLVED),
            Err(ObservationError::InvalidEvidence)
        );
    }
}

#[test]
fn observation_reports_an_unlimited_memory_limit_as_null() {
    let alloc = record(AllocationState::Running);
    let read = ProviderRead::Sampled(ProviderSample {
        observed_at: RESOLVED,
        started_at: None,
        readings: SampleReadings {
            memory_usage_bytes: Some(5),
            memory_limit_bytes: Some(9_223_372_036_854_771_712),
            ..SampleReadings::default()
        },
        disk: None,
    });
    let row = observe(&managed(Some(&alloc)), Some(&read));
    assert_eq!(row.memory, Some(ByteUsage { usage_bytes: Some(5), limit_bytes: None }));
}

#[test]
fn observation_refuses_records_that_contradict_the_mode() {
    let none_with_env = ObservationRecords {
        session_id: session(),
        mode: EnvironmentMode::None,
        environment_id: env(),
        allocation: None,
    };
    assert_eq!(
        runtime_observation(&none_with_env, None, RESOLVED),
        Err(ObservationError::InconsistentIdentity)
    );
    let managed_without_env = ObservationRecords { environment_id: None, ..managed(None) };
    assert_eq!(
        runtime_observation(&managed_without_env, None, RESOLVED),
        Err(ObservationError::InconsistentIdentity)
    );
    let alloc = record(AllocationState::Running);
    let self_hosted_with_alloc =
        ObservationRecords { mode: EnvironmentMode::SelfHosted, ..managed(Some(&alloc)) };
    assert_eq!(
        runtime_observation(&self_hosted_with_alloc, None, RESOLVED),
        Err(ObservationError::InconsistentIdentity)
    );
}

#[test]
fn observation_single_read_refuses_any_query_parameter() {
    assert_eq!(reject_query_parameters(&Query::parse(None)), Ok(()));
    assert!(reject_query_parameters(&Query::parse(Some("x=1"))).is_err());
    assert!(history_supported(EnvironmentMode::OpenaiHosted));
    assert!(!history_supported(EnvironmentMode::SelfHosted));
}

fn arb_state() -> impl Strategy<Value = AllocationState> {
    use AllocationState::*;
    prop::sample::select(vec![
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
    ])
}

fn arb_read() -> impl Strategy<Value = Option<ProviderRead>> {
    let sample = (
        prop::option::of(0.0f64..1e6),
        prop::option::of(0.0f64..4.0),
        prop::option::of(0.1f64..64.0),
        prop::option::of(0u64..1 << 40),
        prop::option::of(1u64..1 << 40),
        prop::option::of((0u64..1 << 40, 1u64..1 << 40)),
        prop::bool::ANY,
    )
        .prop_map(|(cpu, ratio, capacity, usage, limit, disk, cumulative)| {
            ProviderRead::Sampled(ProviderSample {
                observed_at: Timestamp::from_unix_seconds(1_789_953_000),
                started_at: capacity.map(|_| Timestamp::from_unix_seconds(1_789_950_000)),
                readings: SampleReadings {
                    cpu_seconds_total: if cumulative { cpu } else { None },
                    utilization_ratio: if cumulative { None } else { ratio },
                    capacity_cores: capacity,
                    memory_usage_bytes: usage,
                    memory_limit_bytes: limit,
                },
                disk: disk.map(|(u, l)| ByteUsage { usage_bytes: Some(u), limit_bytes: Some(l) }),
            })
        });
    prop_oneof![
        Just(None),
        Just(Some(ProviderRead::NotRunning)),
        Just(Some(ProviderRead::SourceNotConfigured)),
        Just(Some(ProviderRead::Timeout)),
        Just(Some(ProviderRead::Unavailable)),
        sample.prop_map(Some),
    ]
}

proptest! {
    #[test]
    fn observation_builder_output_always_passes_the_client_checks(
        mode in prop::sample::select(vec![EnvironmentMode::None, EnvironmentMode::SelfHosted, EnvironmentMode::OpenaiHosted]),
        state in prop::option::of(arb_state()),
        device in prop::bool::ANY,
        read in arb_read(),
    ) {
        let mut alloc = record(state.unwrap_or(AllocationState::Running));
        if !device {
            alloc.device_id = None;
        }
        let managed = mode == EnvironmentMode::OpenaiHosted;
        let records = ObservationRecords {
            session_id: session(),
            mode,
            environment_id: if mode == EnvironmentMode::None { None } else { env() },
            allocation: if managed && state.is_some() { Some(&alloc) } else { None },
        };
        let row = runtime_observation(&records, read.as_ref(), RESOLVED).expect("consistent records");
        let (single, disk) = row.split();
        prop_assert_eq!(check_observation(&single, Some(disk.as_ref())), Ok(()));
        prop_assert_eq!(check_observation(&single, None), Ok(()));
        if disk.is_some() {
            prop_assert_eq!(single.status, ObservationStatus::Observed);
        }
    }
}
