use agentplane_domain::session::EnvironmentMode;
use agentplane_domain::telemetry::history_wire as history;
use agentplane_domain::telemetry::observation_wire as observation;
use agentplane_domain::telemetry::observation_wire::{
    AdminRuntimeObservation, ByteUsage, CpuObservation, InstanceKind, LifecycleState, ObservationStatus,
    RuntimeInstance, RuntimeObservationList, RuntimeObservationRow,
};
use agentplane_domain::telemetry::sample::{ComputeStart, Reason};
use agentplane_domain::telemetry::{AllocationId, DeviceId, EnvironmentId};
use agentplane_domain::{ProjectId, SessionId};
use serde_json::json;

use super::*;

fn admin(seed: u8, disk: Option<ByteUsage>) -> AdminRuntimeObservation {
    let session = SessionId::from_random([seed; 16]);
    observation::RuntimeObservation {
        id: session,
        object: observation::OBSERVATION_OBJECT.to_owned(),
        session_id: session,
        environment_id: Some(EnvironmentId::from_random([2; 16])),
        mode: EnvironmentMode::OpenaiHosted,
        provider_type: Some("docker".into()),
        instance: RuntimeInstance {
            kind: InstanceKind::ManagedAllocation,
            allocation_id: Some(AllocationId::from_random([3; 16])),
            device_id: Some(DeviceId::from_random([4; 16])),
            connection_generation: None,
        },
        lifecycle_state: Some(LifecycleState::Active),
        status: ObservationStatus::Observed,
        reason: Some(Reason::SampleTimeout),
        allocation_created_at: Some(10),
        resolved_at: 20,
        observed_at: Some(19),
        started_at: None,
        cpu: Some(CpuObservation {
            usage_seconds_total: Some(1.5),
            capacity_cores: Some(2.0),
            usage_cores: None,
            utilization_ratio: None,
        }),
        memory: Some(ByteUsage { usage_bytes: Some(5), limit_bytes: None }),
    }
    .with_disk(disk)
}

#[test]
fn observations_serialize_as_the_domain_types() {
    let single = admin(1, None).split().0;
    assert_eq!(json!(RuntimeObservationBody::from(&single)), json!(single));
    let rows = vec![
        RuntimeObservationRow {
            project_id: ProjectId::from_random([9; 16]),
            observation: admin(1, Some(ByteUsage { usage_bytes: Some(1), limit_bytes: Some(2) })),
        },
        RuntimeObservationRow { project_id: ProjectId::from_random([8; 16]), observation: admin(5, None) },
    ];
    for list in [RuntimeObservationList::new(rows, true), RuntimeObservationList::new(Vec::new(), false)] {
        let domain = json!(list);
        assert_eq!(json!(observation_list(list)), domain);
    }
}

#[test]
fn history_serializes_as_the_domain_type() {
    let h = history::RuntimeHistory {
        object: history::HISTORY_OBJECT.to_owned(),
        source: history::HISTORY_SOURCE.to_owned(),
        session_id: SessionId::from_random([1; 16]),
        requested_range: history::RequestedRange { start: 0, end: 120 },
        resolution_seconds: 60,
        generated_at: 121,
        coverage: history::Coverage {
            retained_start: 0,
            first_sample_at: Some(1),
            last_sample_at: None,
            sample_count: 2,
            expected_sample_count: 4,
            buckets: vec![history::CoverageBucket {
                start: 0,
                end: 60,
                first_observed_at: 1,
                last_observed_at: 50,
                observation_count: 2,
                observed_count: 1,
                unavailable_count: 1,
            }],
        },
        series: vec![history::RuntimeSeries {
            allocation_id: AllocationId::from_random([3; 16]),
            environment_id: EnvironmentId::from_random([2; 16]),
            provider_type: "e2b".into(),
            started_at: ComputeStart::new(5, 6),
            points: vec![
                history::SeriesPoint {
                    start: 0,
                    end: 60,
                    observation_count: 2,
                    observed_count: 1,
                    unavailable_count: 1,
                    cpu: Some(history::CpuPoint {
                        utilization_ratio: 0.5,
                        capacity_cores: None,
                        contributor_count: 1,
                    }),
                    memory: Some(history::MemoryPoint {
                        usage_bytes: Some(7),
                        limit_bytes: None,
                        contributor_count: 1,
                    }),
                },
                history::SeriesPoint {
                    start: 60,
                    end: 120,
                    observation_count: 1,
                    observed_count: 0,
                    unavailable_count: 1,
                    cpu: None,
                    memory: None,
                },
            ],
        }],
        token_usage: vec![history::TokenUsagePoint {
            start: 0,
            end: 60,
            sampled_at: 30,
            input_tokens: 3,
            output_tokens: 4,
        }],
    };
    assert_eq!(json!(RuntimeHistoryBody::from(&h)), json!(h));
}
