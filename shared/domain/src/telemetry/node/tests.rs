use proptest::prelude::*;

use super::*;

fn counters(connection: &str, stat: Option<ProcStatCpu>) -> CpuCounters {
    CpuCounters { connection_id: connection.into(), stat }
}

fn stat(user: u64, idle: u64, iowait: u64, guest: u64) -> ProcStatCpu {
    ProcStatCpu { user, idle, iowait, guest, ..ProcStatCpu::default() }
}

#[test]
fn node_proc_stat_parses_the_aggregate_line() {
    let text = "cpu  10 2 3 400 5 6 7 8 9 1\ncpu0 1 1 1 1 1 1 1 1 1 1\nintr 5\n";
    let s = ProcStatCpu::parse(text).expect("parses");
    assert_eq!((s.user, s.nice, s.idle, s.steal, s.guest, s.guest_nice), (10, 2, 400, 8, 9, 1));
    assert_eq!(ProcStatCpu::parse("cpu  1 2 3 4").map(|s| s.iowait), Some(0));
    assert_eq!(ProcStatCpu::parse("cpu  1 x 3 4"), None);
    assert_eq!(ProcStatCpu::parse("cpu0 1 2 3 4"), None);
}

#[test]
fn node_cpu_utilization_counts_busy_ticks_between_two_heartbeats() {
    let before = counters("c1", Some(stat(100, 100, 0, 0)));
    let after = counters("c1", Some(stat(130, 150, 20, 0)));
    // busy 30 of 30 + 50 idle + 20 iowait.
    assert_eq!(host_cpu_utilization(Some(&before), &after), Some(0.3));
}

#[test]
fn node_cpu_utilization_does_not_count_guest_time_twice() {
    let before = counters("c1", Some(stat(100, 100, 0, 50)));
    let after = counters("c1", Some(stat(150, 150, 0, 100)));
    assert_eq!(host_cpu_utilization(Some(&before), &after), Some(0.5));
}

#[test]
fn node_cpu_utilization_is_null_on_the_first_heartbeat_of_a_connection() {
    let after = counters("c2", Some(stat(150, 150, 0, 0)));
    assert_eq!(host_cpu_utilization(None, &after), None);
    assert_eq!(host_cpu_utilization(Some(&counters("c1", Some(stat(1, 1, 0, 0)))), &after), None);
}

#[test]
fn node_cpu_utilization_is_null_after_a_counter_reset_or_an_unreadable_baseline() {
    let after = counters("c1", Some(stat(150, 150, 0, 0)));
    assert_eq!(host_cpu_utilization(Some(&counters("c1", Some(stat(200, 100, 0, 0)))), &after), None);
    assert_eq!(host_cpu_utilization(Some(&counters("c1", None)), &after), None);
    assert_eq!(host_cpu_utilization(Some(&after), &counters("c1", None)), None);
    assert_eq!(host_cpu_utilization(Some(&after), &after), None, "no ticks elapsed");
}

#[test]
fn node_range_defaults_to_one_hour_and_refuses_anything_else() {
    let parse = |q: &str| NodeRange::from_query(&Query::parse(Some(q)));
    assert_eq!(NodeRange::from_query(&Query::parse(None)), Ok(NodeRange::OneHour));
    assert_eq!(parse("range=6h"), Ok(NodeRange::SixHours));
    assert_eq!(parse("range=24h"), Ok(NodeRange::OneDay));
    assert!(parse("range=2h").is_err());
    assert!(parse("range=1h&range=1h").is_err());
    assert!(parse("range=1h&x=1").is_err());
    assert!(parse("range=").is_err());
}

#[test]
fn node_history_resolution_is_60_300_900_seconds() {
    let now = Timestamp::from_unix_seconds(1_790_000_000);
    for (range, width, count) in
        [(NodeRange::OneHour, 60, 60), (NodeRange::SixHours, 300, 72), (NodeRange::OneDay, 900, 96)]
    {
        let h = node_history(range, now, &[]);
        assert_eq!((h.resolution_seconds, h.points.len()), (width, count));
        assert!(
            h.points.iter().all(|p| p.cpu_utilization_max.is_none() && p.memory_used_bytes_max.is_none())
        );
    }
}

#[test]
fn node_history_leaves_out_the_bucket_in_progress() {
    // 2026-09-25T09:00:30Z: the 09:00 bucket is in progress.
    let now = Timestamp::from_unix_seconds(1_790_326_830);
    let obs = |at: i64, cpu: f64, avail: u64, disk: u64| NodeObservation {
        observed_at: Timestamp::from_unix_seconds(at),
        effective_cpu_cores: Some(4.0),
        cpu_utilization: Some(cpu),
        total_memory_bytes: Some(100),
        available_memory_bytes: Some(avail),
        available_disk_bytes: Some(disk),
    };
    let h = node_history(
        NodeRange::OneHour,
        now,
        &[obs(1_790_326_790, 0.4, 60, 7), obs(1_790_326_750, 0.2, 30, 9), obs(1_790_326_820, 0.9, 0, 1)],
    );
    let last = h.points.last().expect("60 points");
    assert_eq!(last.start, "2026-09-25T08:59:00Z");
    assert_eq!(h.points[0].start, "2026-09-25T08:00:00Z");
    assert_eq!(
        (last.cpu_utilization_max, last.memory_used_bytes_max, last.available_disk_bytes_min),
        (Some(0.4), Some(70), Some(7))
    );
}

#[test]
fn node_host_is_all_null_before_the_first_heartbeat() {
    let host = host_observation(None);
    assert_eq!(host.observed_at, None);
    let json = serde_json::to_value(&host).expect("serializes");
    assert!(json.as_object().is_some_and(|o| o.len() == 6 && o.values().all(serde_json::Value::is_null)));
}

proptest! {
    #[test]
    fn node_cpu_utilization_stays_between_zero_and_one(
        a in prop::array::uniform10(0u64..1_000_000),
        d in prop::array::uniform10(0u64..1_000_000),
    ) {
        let before = ProcStatCpu { user: a[0], nice: a[1], system: a[2], idle: a[3], iowait: a[4], irq: a[5],
            softirq: a[6], steal: a[7], guest: a[8], guest_nice: a[9] };
        let after = ProcStatCpu { user: a[0] + d[0], nice: a[1] + d[1], system: a[2] + d[2], idle: a[3] + d[3],
            iowait: a[4] + d[4], irq: a[5] + d[5], softirq: a[6] + d[6], steal: a[7] + d[7], guest: a[8] + d[8],
            guest_nice: a[9] + d[9] };
        let u = host_cpu_utilization(Some(&counters("c", Some(before))), &counters("c", Some(after)));
        prop_assert!(u.is_none_or(|u| (0.0..=1.0).contains(&u)));
        let elapsed: u64 = d[..8].iter().sum();
        prop_assert_eq!(u.is_some(), elapsed > 0);
    }

    #[test]
    fn node_history_buckets_are_complete_consecutive_and_end_before_now(now in 0i64..4_000_000_000, r in 0usize..3) {
        let range = [NodeRange::OneHour, NodeRange::SixHours, NodeRange::OneDay][r];
        let h = node_history(range, Timestamp::from_unix_seconds(now), &[]);
        let starts: Vec<i64> = h.points.iter().filter_map(|p| parse_rfc3339_seconds(&p.start)).collect();
        prop_assert_eq!(starts.len(), range.bucket_count());
        for pair in starts.windows(2) {
            prop_assert_eq!(pair[1] - pair[0], h.resolution_seconds);
        }
        let last_end = starts[starts.len() - 1] + h.resolution_seconds;
        prop_assert!(last_end <= now && now - last_end < h.resolution_seconds);
        prop_assert!(starts.iter().all(|s| s % h.resolution_seconds == 0));
    }
}
