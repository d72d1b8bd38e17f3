use proptest::prelude::*;

use super::*;

const NOW: i64 = 1_789_954_801;

fn parse(q: &str) -> Result<HistoryQuery, HistoryQueryError> {
    HistoryQuery::from_query(&Query::parse(Some(q)), Timestamp::from_unix_seconds(NOW))
}

fn code(q: &str) -> &'static str {
    match parse(q) {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}

fn every(seconds: u32) -> SamplingInterval {
    SamplingInterval::from_seconds(seconds).unwrap_or(SamplingInterval(1))
}

#[test]
fn history_query_accepts_the_spec_example_and_defaults_max_points_to_120() {
    let q = parse("start=1789951200&end=1789954800").expect("valid");
    assert_eq!((q.start(), q.end(), q.max_points()), (1_789_951_200, 1_789_954_800, 120));
}

#[test]
fn history_query_refuses_unknown_or_repeated_parameters_as_unsupported() {
    assert_eq!(code("start=1&end=2&foo=1"), "unsupported_parameter");
    assert_eq!(code("start=1&start=1&end=2"), "unsupported_parameter");
    assert_eq!(code("start=1&end=2&max_points=5&max_points=5"), "unsupported_parameter");
    // Unknown names win over an invalid value.
    assert_eq!(code("start=x&end=2&foo=1"), "unsupported_parameter");
}

#[test]
fn history_query_refuses_invalid_ranges_and_max_points_as_invalid_request() {
    assert_eq!(code("end=2"), "invalid_request");
    assert_eq!(code("start=1"), "invalid_request");
    assert_eq!(code("start=-1&end=2"), "invalid_request");
    assert_eq!(code("start=1.0&end=2"), "invalid_request");
    assert_eq!(code("start=5&end=5"), "invalid_request");
    assert_eq!(code("start=6&end=5"), "invalid_request");
    assert_eq!(code("start=0&end=86401"), "invalid_request");
    assert_eq!(code("start=0&end=86400"), "ok");
    assert_eq!(code("start=0&end=10&max_points=1"), "invalid_request");
    assert_eq!(code("start=0&end=10&max_points=1001"), "invalid_request");
    assert_eq!(code("start=0&end=10&max_points=1000"), "ok");
    assert_eq!(code("start=0&end=10&max_points=2"), "ok");
    assert_eq!(code("start=0&end=10&max_points="), "invalid_request");
}

#[test]
fn history_end_may_be_at_most_one_second_in_the_future() {
    assert_eq!(code(&format!("start={}&end={}", NOW - 60, NOW + 1)), "ok");
    assert_eq!(code(&format!("start={}&end={}", NOW - 60, NOW + 2)), "invalid_request");
}

#[test]
fn history_bucket_width_is_at_least_thirty_seconds() {
    let q = HistoryQuery::new(0, 600, Some(1000)).expect("valid");
    assert_eq!(BucketPlan::new(q, every(1)).width(), 30);
}

#[test]
fn history_bucket_width_is_at_least_the_sampling_interval() {
    let q = HistoryQuery::new(0, 3600, Some(1000)).expect("valid");
    assert_eq!(BucketPlan::new(q, every(45)).width(), 45);
}

#[test]
fn history_bucket_width_rounds_the_range_per_point_up() {
    let q = HistoryQuery::new(0, 3601, Some(120)).expect("valid");
    let plan = BucketPlan::new(q, every(30));
    assert_eq!(plan.width(), 31);
    assert_eq!(plan.len(), 117);
    assert_eq!(plan.bounds(116), (3596, 3601));
}

#[test]
fn history_one_hour_at_120_points_has_thirty_second_buckets() {
    // The spec's example shows resolution_seconds 60 for this query; with a 30 s sampling
    // interval the normative rule gives 30 s (a 60 s interval would give 60 expected samples,
    // not the example's 120). The rule wins over the illustration.
    let q = HistoryQuery::new(1_789_951_200, 1_789_954_800, None).expect("valid");
    assert_eq!(BucketPlan::new(q, every(30)).width(), 30);
    assert_eq!(BucketPlan::new(q, every(60)).width(), 60);
    let q = HistoryQuery::new(1_789_951_200, 1_789_954_800, Some(60)).expect("valid");
    let plan = BucketPlan::new(q, every(30));
    assert_eq!((plan.width(), plan.len()), (60, 60));
}

#[test]
fn history_samples_at_end_fall_outside_the_last_bucket() {
    let q = HistoryQuery::new(100, 200, None).expect("valid");
    let plan = BucketPlan::new(q, every(30));
    assert_eq!(plan.index_of(Timestamp::from_unix_seconds(100)), Some(0));
    assert_eq!(plan.index_of(Timestamp::from_unix_millis(199_999)), Some(3));
    assert_eq!(plan.index_of(Timestamp::from_unix_seconds(200)), None);
    assert_eq!(plan.index_of(Timestamp::from_unix_millis(99_999)), None);
}

proptest! {
    #[test]
    fn history_buckets_tile_the_range_exactly(
        start in 0i64..4_000_000_000,
        range in 1i64..=MAX_RANGE_SECONDS,
        max_points in MIN_MAX_POINTS..=MAX_MAX_POINTS,
        interval in 1u32..=600,
    ) {
        let q = HistoryQuery::new(start, start + range, Some(max_points)).expect("valid");
        let plan = BucketPlan::new(q, every(interval));
        let buckets: Vec<_> = plan.buckets().collect();
        prop_assert!(!buckets.is_empty());
        prop_assert_eq!(buckets[0].0, start);
        prop_assert_eq!(buckets[buckets.len() - 1].1, start + range);
        for pair in buckets.windows(2) {
            prop_assert_eq!(pair[0].1, pair[1].0);
        }
        for (s, e) in &buckets {
            prop_assert!(s < e);
            prop_assert!(e - s <= plan.width());
        }
    }

    #[test]
    fn history_bucket_count_never_exceeds_max_points(
        range in 1i64..=MAX_RANGE_SECONDS,
        max_points in MIN_MAX_POINTS..=MAX_MAX_POINTS,
        interval in 1u32..=600,
    ) {
        let q = HistoryQuery::new(0, range, Some(max_points)).expect("valid");
        let plan = BucketPlan::new(q, every(interval));
        prop_assert!(plan.len() <= max_points as usize);
        prop_assert!(plan.width() >= MIN_BUCKET_SECONDS);
        prop_assert!(plan.width() >= i64::from(interval));
        prop_assert!(plan.width() * i64::from(max_points) >= range);
    }

    #[test]
    fn history_every_instant_in_range_has_exactly_its_bucket(
        start in 0i64..4_000_000_000,
        range in 1i64..=MAX_RANGE_SECONDS,
        max_points in MIN_MAX_POINTS..=MAX_MAX_POINTS,
        offset_ms in 0i64..(MAX_RANGE_SECONDS * 1000),
    ) {
        let q = HistoryQuery::new(start, start + range, Some(max_points)).expect("valid");
        let plan = BucketPlan::new(q, every(30));
        let at = start * 1000 + offset_ms % (range * 1000);
        let index = plan.index_of(Timestamp::from_unix_millis(at));
        prop_assert!(index.is_some());
        let (s, e) = plan.bounds(index.unwrap_or(usize::MAX));
        prop_assert!(s * 1000 <= at && at < e * 1000);
    }

    #[test]
    fn history_query_round_trips_through_its_query_string(
        start in 0i64..4_000_000_000,
        range in 1i64..=MAX_RANGE_SECONDS,
        max_points in MIN_MAX_POINTS..=MAX_MAX_POINTS,
    ) {
        let q = HistoryQuery::new(start, start + range, Some(max_points)).expect("valid");
        let now = Timestamp::from_unix_seconds(start + range);
        let back = HistoryQuery::from_query(&Query::parse(Some(&q.to_query_string())), now);
        prop_assert_eq!(back, Ok(q));
    }
}
