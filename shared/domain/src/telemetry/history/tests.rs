use proptest::prelude::*;

use super::*;
use crate::telemetry::sample::{Reason, SampleAllocation, SampleStatus, TokenUsage};

const START: i64 = 1_789_951_200;
const END: i64 = START + 3600;

fn session() -> SessionId {
    SessionId::from_random([1; 16])
}

fn allocation(n: u8, incarnation: i64) -> SampleAllocation {
    SampleAllocation {
        allocation_id: AllocationId::from_random([n; 16]),
        environment_id: EnvironmentId::from_random([9; 16]),
        provider_type: "docker".into(),
        compute_started_at: ComputeStart::new(incarnation, 500),
    }
}

fn cumulative(at_s: i64, alloc: &SampleAllocation, cpu: f64, cores: f64) -> RuntimeSample {
    RuntimeSample {
        sampled_at: Timestamp::from_unix_seconds(at_s),
        allocation: Some(alloc.clone()),
        status: SampleStatus::Observed {
            readings: SampleReadings {
                cpu_seconds_total: Some(cpu),
                capacity_cores: Some(cores),
                memory_usage_bytes: Some(100 + at_s as u64 % 7),
                memory_limit_bytes: Some(1 << 30),
                ..SampleReadings::default()
            },
        },
        token_usage: None,
    }
}

fn ratio(at_s: i64, alloc: &SampleAllocation, r: f64) -> RuntimeSample {
    RuntimeSample {
        sampled_at: Timestamp::from_unix_seconds(at_s),
        allocation: Some(alloc.clone()),
        status: SampleStatus::Observed {
            readings: SampleReadings { utilization_ratio: Some(r), ..SampleReadings::default() },
        },
        token_usage: None,
    }
}

fn unavailable(at_s: i64, alloc: Option<&SampleAllocation>) -> RuntimeSample {
    RuntimeSample {
        sampled_at: Timestamp::from_unix_seconds(at_s),
        allocation: alloc.cloned(),
        status: SampleStatus::Unavailable { reason: Reason::SampleTimeout },
        token_usage: None,
    }
}

fn interval() -> SamplingInterval {
    SamplingInterval::from_seconds(30).expect("30 s")
}

fn build(samples: &[RuntimeSample]) -> RuntimeHistory {
    build_at(samples, END + 1)
}

/// One hour in 60 buckets of 60 s, sampled every 30 s.
fn build_at(samples: &[RuntimeSample], now: i64) -> RuntimeHistory {
    let q = HistoryQuery::new(START, END, Some(60)).expect("valid");
    build_runtime_history(session(), q, interval(), Timestamp::from_unix_seconds(now), samples)
        .expect("builds")
}

#[test]
fn history_without_samples_has_empty_arrays_and_null_sample_times() {
    let h = build(&[]);
    assert_eq!(h.object, "agent.runtime_history");
    assert_eq!(h.source, "durable");
    assert_eq!(h.resolution_seconds, 60);
    assert_eq!(h.coverage.sample_count, 0);
    assert_eq!(h.coverage.expected_sample_count, 120);
    assert_eq!((h.coverage.first_sample_at, h.coverage.last_sample_at), (None, None));
    assert!(h.coverage.buckets.is_empty() && h.series.is_empty() && h.token_usage.is_empty());
    let json = serde_json::to_value(&h).expect("serializes");
    assert_eq!(json["coverage"]["first_sample_at"], serde_json::Value::Null);
    assert_eq!(json["requested_range"], serde_json::json!({"start": START, "end": END}));
}

#[test]
fn history_retained_start_is_seven_days_before_generated_at_when_later_than_start() {
    let now = START + SAMPLE_RETENTION_SECONDS + 600;
    let h = build_at(&[], now);
    assert_eq!(h.coverage.retained_start, START + 600);
    assert_eq!(h.coverage.expected_sample_count, 100);
}

#[test]
fn history_samples_before_the_retained_start_are_not_counted() {
    let a = allocation(1, START - 100);
    let now = START + SAMPLE_RETENTION_SECONDS + 600;
    let h = build_at(&[cumulative(START + 10, &a, 1.0, 1.0), cumulative(START + 610, &a, 2.0, 1.0)], now);
    assert_eq!(h.coverage.sample_count, 1);
    assert_eq!(h.coverage.first_sample_at, Some(START + 610));
}

#[test]
fn history_expected_sample_count_rounds_partial_intervals_up() {
    assert_eq!(expected_sample_count(0, 61, interval()), 3);
    assert_eq!(expected_sample_count(0, 60, interval()), 2);
    assert_eq!(expected_sample_count(100, 50, interval()), 0);
}

#[test]
fn history_only_buckets_with_samples_appear_and_gaps_stay_gaps() {
    let a = allocation(1, START - 100);
    let h = build(&[
        cumulative(START + 10, &a, 10.0, 2.0),
        cumulative(START + 40, &a, 40.0, 2.0),
        cumulative(START + 600, &a, 50.0, 2.0),
    ]);
    let starts: Vec<i64> = h.coverage.buckets.iter().map(|b| b.start).collect();
    assert_eq!(starts, vec![START, START + 600]);
    assert_eq!(h.series.len(), 1);
    assert_eq!(h.series[0].points.len(), 2);
    let first = &h.coverage.buckets[0];
    assert_eq!(
        (first.first_observed_at, first.last_observed_at, first.observation_count),
        (START + 10, START + 40, 2)
    );
}

#[test]
fn history_cpu_ratio_is_cpu_seconds_over_elapsed_times_capacity() {
    let a = allocation(1, START - 100);
    let h = build(&[cumulative(START + 10, &a, 10.0, 2.0), cumulative(START + 40, &a, 40.0, 2.0)]);
    let cpu = h.series[0].points[0].cpu.clone().expect("one interval");
    assert_eq!(cpu.utilization_ratio, 0.5);
    assert_eq!(cpu.capacity_cores, Some(2.0));
    assert_eq!(cpu.contributor_count, 1);
}

#[test]
fn history_cpu_of_a_bucket_weights_all_intervals_that_end_in_it() {
    let a = allocation(1, START - 100);
    // Intervals: [0,30) 30 s used of 60 core-s; [30,40) 0 s of 20 core-s; [40,60) 20 s of 40.
    let h = build(&[
        cumulative(START - 30, &a, 0.0, 2.0),
        cumulative(START, &a, 30.0, 2.0),
        cumulative(START + 10, &a, 30.0, 2.0),
        cumulative(START + 30, &a, 50.0, 2.0),
    ]);
    let cpu = h.series[0].points[0].cpu.clone().expect("intervals");
    assert_eq!(cpu.contributor_count, 3);
    assert!((cpu.utilization_ratio - 50.0 / 120.0).abs() < 1e-12);
    // The sample before start is a baseline only.
    assert_eq!(h.coverage.sample_count, 3);
}

#[test]
fn history_cpu_baseline_resets_on_a_new_incarnation() {
    let a = allocation(1, START - 100);
    let b = allocation(1, START + 20);
    let h = build(&[cumulative(START + 10, &a, 100.0, 1.0), cumulative(START + 40, &b, 5.0, 1.0)]);
    assert_eq!(h.series.len(), 1, "one series per allocation across incarnations");
    assert_eq!(h.series[0].points[0].cpu, None);
    assert_eq!(h.series[0].started_at, ComputeStart::new(START - 100, 500));
}

#[test]
fn history_cpu_baseline_resets_when_a_counter_decreases() {
    let a = allocation(1, START - 100);
    let h = build(&[
        cumulative(START + 10, &a, 100.0, 1.0),
        cumulative(START + 20, &a, 5.0, 1.0),
        cumulative(START + 30, &a, 10.0, 1.0),
    ]);
    let cpu = h.series[0].points[0].cpu.clone().expect("interval after reset");
    assert_eq!(cpu.contributor_count, 1);
    assert_eq!(cpu.utilization_ratio, 0.5);
}

#[test]
fn history_ratio_providers_report_the_mean_of_sampled_ratios() {
    let a = SampleAllocation { provider_type: "e2b".into(), ..allocation(2, START) };
    let h = build(&[ratio(START + 10, &a, 0.25), ratio(START + 40, &a, 1.25)]);
    let cpu = h.series[0].points[0].cpu.clone().expect("ratios");
    assert_eq!((cpu.utilization_ratio, cpu.contributor_count, cpu.capacity_cores), (0.75, 2, None));
}

#[test]
fn history_memory_is_the_last_value_in_the_bucket() {
    let a = allocation(1, START);
    let h = build(&[cumulative(START + 10, &a, 1.0, 1.0), cumulative(START + 41, &a, 2.0, 1.0)]);
    let memory = h.series[0].points[0].memory.clone().expect("memory");
    assert_eq!(memory.usage_bytes, Some(100 + (START + 41) as u64 % 7));
    assert_eq!(memory.contributor_count, 2);
}

#[test]
fn history_unavailable_samples_without_allocation_count_only_in_coverage() {
    let a = allocation(1, START);
    let h = build(&[unavailable(START + 5, None), unavailable(START + 35, Some(&a))]);
    assert_eq!(h.coverage.sample_count, 2);
    assert_eq!(h.coverage.buckets[0].unavailable_count, 2);
    assert_eq!(h.series.len(), 1);
    let point = &h.series[0].points[0];
    assert_eq!((point.observation_count, point.unavailable_count), (1, 1));
    assert_eq!((point.cpu.clone(), point.memory.clone()), (None, None));
    assert_eq!(h.series[0].started_at, ComputeStart::new(START, 500));
}

#[test]
fn history_token_usage_keeps_the_last_cumulative_value_of_each_bucket() {
    let mut early = unavailable(START + 5, None);
    early.token_usage = Some(TokenUsage { input_tokens: 1, output_tokens: 2 });
    let mut late = unavailable(START + 50, None);
    late.token_usage = Some(TokenUsage { input_tokens: 10, output_tokens: 20 });
    let h = build(&[late, early]);
    assert_eq!(h.token_usage.len(), 1);
    let point = &h.token_usage[0];
    assert_eq!((point.sampled_at, point.input_tokens, point.output_tokens), (START + 50, 10, 20));
    assert_eq!((point.start, point.end), (START, START + 60));
}

#[test]
fn history_refuses_an_allocation_whose_samples_disagree_on_identity() {
    let a = allocation(1, START);
    let other = SampleAllocation { provider_type: "e2b".into(), ..a.clone() };
    let q = HistoryQuery::new(START, END, None).expect("valid");
    let result = build_runtime_history(
        session(),
        q,
        interval(),
        Timestamp::from_unix_seconds(END),
        &[ratio(START + 1, &a, 0.1), ratio(START + 2, &other, 0.1)],
    );
    assert_eq!(result.map_err(|e| e.code()), Err("internal_error"));
}

#[test]
fn history_refuses_more_than_64_series() {
    let samples: Vec<_> =
        (0..65u8).map(|n| ratio(START + i64::from(n), &allocation(n, START), 0.1)).collect();
    let q = HistoryQuery::new(START, END, None).expect("valid");
    let result = build_runtime_history(session(), q, interval(), Timestamp::from_unix_seconds(END), &samples);
    assert_eq!(result, Err(HistoryError::TooLarge));
    assert_eq!(HistoryError::TooLarge.status(), 503);
}

#[test]
fn history_refuses_more_than_ten_thousand_points() {
    // 1000 buckets of 86.4 s; 10 allocations each with a sample in every bucket = 11,000 points.
    let q = HistoryQuery::new(START, START + 86_400, Some(1000)).expect("valid");
    let samples: Vec<_> = (0..1000i64)
        .flat_map(|b| (0..10u8).map(move |n| ratio(START + b * 87, &allocation(n, START), 0.1)))
        .filter(|s| s.sampled_at < Timestamp::from_unix_seconds(START + 86_400))
        .collect();
    let result = build_runtime_history(
        session(),
        q,
        interval(),
        Timestamp::from_unix_seconds(START + 86_400),
        &samples,
    );
    assert_eq!(result, Err(HistoryError::TooLarge));
}

#[test]
fn history_refuses_non_finite_stored_values() {
    let a = allocation(1, START);
    let q = HistoryQuery::new(START, END, None).expect("valid");
    let result = build_runtime_history(
        session(),
        q,
        interval(),
        Timestamp::from_unix_seconds(END),
        &[ratio(START + 1, &a, f64::NAN)],
    );
    assert_eq!(result, Err(HistoryError::InvalidSample));
}

#[test]
fn history_started_at_serializes_as_seconds_and_nanoseconds() {
    let a = allocation(1, START);
    let json = serde_json::to_value(build(&[ratio(START + 1, &a, 0.1)])).expect("serializes");
    assert_eq!(json["series"][0]["started_at"], serde_json::json!({"seconds": START, "nanoseconds": 500}));
    assert_eq!(json["series"][0]["points"][0]["memory"], serde_json::Value::Null);
}

#[test]
fn history_wire_types_refuse_missing_nullable_fields_and_unknown_fields() {
    let a = allocation(1, START);
    let mut json = serde_json::to_value(build(&[ratio(START + 1, &a, 0.1)])).expect("serializes");
    assert!(serde_json::from_value::<RuntimeHistory>(json.clone()).is_ok());
    json["series"][0]["points"][0].as_object_mut().map(|p| p.remove("memory"));
    assert!(serde_json::from_value::<RuntimeHistory>(json.clone()).is_err());
    json["series"][0]["points"][0]["memory"] = serde_json::Value::Null;
    json["extra"] = serde_json::json!(1);
    assert!(serde_json::from_value::<RuntimeHistory>(json).is_err());
}

fn arb_samples() -> impl Strategy<Value = Vec<RuntimeSample>> {
    let one = (
        -120i64..3700,
        0u8..3,
        0i64..3,
        prop_oneof![Just(None), (0.0f64..1e6).prop_map(Some)],
        prop_oneof![Just(None), (0.0f64..4.0).prop_map(Some)],
        prop::bool::ANY,
    );
    prop::collection::vec(one, 0..80).prop_map(|rows| {
        rows.into_iter()
            .map(|(offset, alloc, inc, cpu, r, observed)| {
                let a = allocation(alloc, START - inc);
                let at = START + offset;
                if !observed {
                    return unavailable(at, Some(&a));
                }
                RuntimeSample {
                    sampled_at: Timestamp::from_unix_seconds(at),
                    allocation: Some(a),
                    status: SampleStatus::Observed {
                        readings: SampleReadings {
                            cpu_seconds_total: cpu,
                            utilization_ratio: r,
                            capacity_cores: Some(1.5),
                            ..SampleReadings::default()
                        },
                    },
                    token_usage: None,
                }
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn history_cpu_ratio_is_never_negative_and_contributors_are_at_least_one(samples in arb_samples()) {
        let h = build(&samples);
        for series in &h.series {
            for point in &series.points {
                if let Some(cpu) = &point.cpu {
                    prop_assert!(cpu.utilization_ratio >= 0.0 && cpu.utilization_ratio.is_finite());
                    prop_assert!(cpu.contributor_count >= 1);
                }
                if let Some(memory) = &point.memory {
                    prop_assert!(memory.contributor_count >= 1);
                }
            }
        }
    }

    #[test]
    fn history_buckets_are_ordered_within_the_range_and_counts_add_up(samples in arb_samples()) {
        let h = build(&samples);
        let buckets = &h.coverage.buckets;
        prop_assert!(buckets.len() <= 60);
        for pair in buckets.windows(2) {
            prop_assert!(pair[0].end <= pair[1].start);
        }
        for b in buckets {
            prop_assert!(START <= b.start && b.end <= END && b.start < b.end);
            prop_assert!(b.start <= b.first_observed_at && b.first_observed_at <= b.last_observed_at);
            prop_assert!(b.last_observed_at < b.end);
            prop_assert_eq!(b.observation_count, b.observed_count + b.unavailable_count);
        }
        let total: u64 = buckets.iter().map(|b| b.observation_count).sum();
        prop_assert_eq!(total, h.coverage.sample_count);
        let in_range = samples.iter().filter(|s| s.sampled_at >= Timestamp::from_unix_seconds(START)
            && s.sampled_at < Timestamp::from_unix_seconds(END)).count() as u64;
        prop_assert_eq!(h.coverage.sample_count, in_range);
        let series_total: u64 = h.series.iter().flat_map(|s| &s.points).map(|p| p.observation_count).sum();
        prop_assert_eq!(series_total, in_range);
    }

    #[test]
    fn history_is_independent_of_the_order_samples_are_stored_in(samples in arb_samples()) {
        let mut reversed = samples.clone();
        reversed.sort_by_key(|s| s.sampled_at);
        let mut dedup = reversed.clone();
        dedup.dedup_by_key(|s| s.sampled_at);
        prop_assume!(dedup.len() == reversed.len());
        let forward = build(&reversed);
        reversed.reverse();
        prop_assert_eq!(build(&reversed), forward);
    }
}
