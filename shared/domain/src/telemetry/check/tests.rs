use proptest::prelude::*;

use super::*;
use crate::telemetry::history::build_runtime_history;
use crate::telemetry::history_query::HistoryQuery;
use crate::telemetry::history_query::SamplingInterval;
use crate::telemetry::history_wire::RuntimeHistory;
use crate::telemetry::ids::{AllocationId, EnvironmentId};
use crate::telemetry::node::NodeRange;
use crate::telemetry::node::{NodeObservation, host_observation, node_history};
use crate::telemetry::sample::ComputeStart;
use crate::telemetry::sample::{RuntimeSample, SampleAllocation, SampleReadings, SampleStatus, TokenUsage};
use crate::{SessionId, Timestamp};

const START: i64 = 1_789_951_200;
const END: i64 = START + 3600;

fn session() -> SessionId {
    SessionId::from_random([1; 16])
}

fn query() -> HistoryQuery {
    HistoryQuery::new(START, END, Some(60)).expect("valid")
}

fn sample(at: i64, alloc: u8, cpu: f64) -> RuntimeSample {
    RuntimeSample {
        sampled_at: Timestamp::from_unix_seconds(at),
        allocation: Some(SampleAllocation {
            allocation_id: AllocationId::from_random([alloc; 16]),
            environment_id: EnvironmentId::from_random([2; 16]),
            provider_type: "docker".into(),
            compute_started_at: ComputeStart::new(START - 10, 0),
        }),
        status: SampleStatus::Observed {
            readings: SampleReadings {
                cpu_seconds_total: Some(cpu),
                capacity_cores: Some(1.0),
                memory_usage_bytes: Some(10),
                memory_limit_bytes: Some(100),
                ..SampleReadings::default()
            },
        },
        token_usage: Some(TokenUsage { input_tokens: at as u64, output_tokens: 1 }),
    }
}

fn history() -> RuntimeHistory {
    let samples = [sample(START + 5, 1, 1.0), sample(START + 35, 1, 10.0), sample(START + 600, 2, 3.0)];
    let interval = SamplingInterval::from_seconds(30).expect("30 s");
    build_runtime_history(session(), query(), interval, Timestamp::from_unix_seconds(END), &samples)
        .expect("builds")
}

#[test]
fn check_history_accepts_what_the_builder_produces() {
    assert_eq!(check_history(&history(), session(), query()), Ok(()));
}

type Corruption = Box<dyn Fn(&mut RuntimeHistory)>;

#[test]
fn check_history_refuses_each_corruption() {
    let corruptions: Vec<(&str, Corruption)> = vec![
        ("object", Box::new(|h| h.object = "list".into())),
        ("source", Box::new(|h| h.source = "live".into())),
        ("session", Box::new(|h| h.session_id = SessionId::from_random([7; 16]))),
        ("range", Box::new(|h| h.requested_range.end -= 1)),
        ("resolution", Box::new(|h| h.resolution_seconds = 29)),
        ("retained", Box::new(|h| h.coverage.retained_start += 1)),
        ("sample_count", Box::new(|h| h.coverage.sample_count += 1)),
        ("first_sample_at", Box::new(|h| h.coverage.first_sample_at = None)),
        ("bucket order", Box::new(|h| h.coverage.buckets.reverse())),
        ("bucket grid", Box::new(|h| h.coverage.buckets[0].start += 1)),
        ("bucket counts", Box::new(|h| h.coverage.buckets[0].observed_count += 1)),
        ("bucket times", Box::new(|h| h.coverage.buckets[0].last_observed_at = START + 60)),
        ("duplicate series", Box::new(|h| h.series[1].allocation_id = h.series[0].allocation_id)),
        (
            "contributors",
            Box::new(|h| {
                if let Some(cpu) = h.series[0].points[0].cpu.as_mut() {
                    cpu.contributor_count = 0;
                }
            }),
        ),
        (
            "negative ratio",
            Box::new(|h| {
                if let Some(cpu) = h.series[0].points[0].cpu.as_mut() {
                    cpu.utilization_ratio = -0.1;
                }
            }),
        ),
        (
            "memory limit",
            Box::new(|h| {
                if let Some(m) = h.series[0].points[0].memory.as_mut() {
                    m.limit_bytes = Some(0);
                }
            }),
        ),
        ("series beyond coverage", Box::new(|h| h.series[0].points[0].observation_count += 1)),
        (
            "nanoseconds",
            Box::new(|h| {
                h.series[0].started_at = Some(ComputeStart { seconds: 1, nanoseconds: 1_000_000_000 })
            }),
        ),
        ("token order", Box::new(|h| h.token_usage.reverse())),
        ("token sampled_at", Box::new(|h| h.token_usage[0].sampled_at = START + 60)),
        ("unsafe tokens", Box::new(|h| h.token_usage[0].input_tokens = u64::MAX)),
        ("expected", Box::new(|h| h.coverage.expected_sample_count = 1)),
    ];
    for (name, corrupt) in corruptions {
        let mut h = history();
        corrupt(&mut h);
        assert!(check_history(&h, session(), query()).is_err(), "{name} was accepted");
    }
}

#[test]
fn check_node_accepts_built_values_and_refuses_out_of_range_ones() {
    let now = Timestamp::from_unix_seconds(1_790_326_830);
    let obs = NodeObservation {
        observed_at: Timestamp::from_unix_seconds(1_790_326_800),
        effective_cpu_cores: Some(4.0),
        cpu_utilization: Some(0.35),
        total_memory_bytes: Some(100),
        available_memory_bytes: Some(60),
        available_disk_bytes: Some(5),
    };
    let host = host_observation(Some(&obs));
    assert_eq!(check_host(&host), Ok(()));
    assert_eq!(host.observed_at.as_deref(), Some("2026-09-25T09:00:00Z"));
    assert_eq!(check_host(&host_observation(None)), Ok(()));
    let mut bad = host.clone();
    bad.cpu_utilization = Some(1.5);
    assert!(check_host(&bad).is_err());
    let mut bad = host.clone();
    bad.available_memory_bytes = Some(101);
    assert!(check_host(&bad).is_err());
    let mut bad = host_observation(None);
    bad.total_memory_bytes = Some(1);
    assert!(check_host(&bad).is_err());

    let history = node_history(NodeRange::SixHours, now, &[obs]);
    assert_eq!(check_node_history(&history, NodeRange::SixHours), Ok(()));
    assert!(check_node_history(&history, NodeRange::OneHour).is_err());
    let mut gap = history.clone();
    gap.points.remove(3);
    assert!(check_node_history(&gap, NodeRange::SixHours).is_err());
    let mut unaligned = history;
    unaligned.points[0].start = "2026-09-25T03:00:01Z".into();
    assert!(check_node_history(&unaligned, NodeRange::SixHours).is_err());
}

fn arb_samples() -> impl Strategy<Value = Vec<RuntimeSample>> {
    prop::collection::vec((0i64..3600, 0u8..4, 0.0f64..100.0), 0..60)
        .prop_map(|rows| rows.into_iter().map(|(at, alloc, cpu)| sample(START + at, alloc, cpu)).collect())
}

proptest! {
    #[test]
    fn check_history_accepts_every_built_history(
        samples in arb_samples(),
        max_points in 2u32..=200,
        interval in 1u32..=120,
        age in 0i64..(8 * 24 * 3600),
    ) {
        let q = HistoryQuery::new(START, END, Some(max_points)).expect("valid");
        let interval = SamplingInterval::from_seconds(interval).expect("positive");
        let h = build_runtime_history(session(), q, interval, Timestamp::from_unix_seconds(END + age), &samples)
            .expect("builds");
        prop_assert_eq!(check_history(&h, session(), q), Ok(()));
    }
}
