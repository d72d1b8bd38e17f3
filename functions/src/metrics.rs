//! Custom metrics as CloudWatch embedded metric format (EMF): one JSON log line per report, which
//! CloudWatch Logs turns into metrics as it ingests the function's log. No API call, no
//! `cloudwatch:PutMetricData` grant, nothing to batch or flush; the alarms in
//! infra/template.yaml watch these names in the stack's namespace (`AGENTPLANE_METRICS_NAMESPACE`,
//! `Agentplane/<stack name>`).
//!
//! Shared code reports a metric with a tracing event of target [`METRIC_TARGET`] and a `metric`
//! field (the name) and, optionally, a `count`; [`Emf`] turns it into its line. Jobs report what
//! their pass found (the retention sweep: runs stuck past their lease) with [`emit`].

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::Context;

/// The tracing target of a metric event:
/// `tracing::warn!(target: "agentplane::metric", metric = "WebhookEndpointsDisabled", …)`.
pub const METRIC_TARGET: &str = "agentplane::metric";

/// Background runs the retention sweep found running with their lease lapsed (their executor
/// died) and settled.
pub const BACKGROUND_RUNS_PAST_LEASE: &str = "BackgroundRunsPastLease";
/// Platform Runs the outbox sweep found owed a message (running with no live lease, or queued
/// with none sent) and sent again.
pub const PLATFORM_RUNS_RESENT: &str = "PlatformRunsResent";
/// Rollbacks the outbox sweep gave up (older than the platform allows).
pub const ROLLBACKS_GIVEN_UP: &str = "RollbacksGivenUp";
/// Webhook endpoints turned off because they answered `410 Gone`.
pub const WEBHOOK_ENDPOINTS_DISABLED: &str = "WebhookEndpointsDisabled";

/// Every metric the functions emit (the template's alarms and dashboard name only these).
pub const ALL: &[&str] =
    &[BACKGROUND_RUNS_PAST_LEASE, PLATFORM_RUNS_RESENT, ROLLBACKS_GIVEN_UP, WEBHOOK_ENDPOINTS_DISABLED];

/// The namespace: the stack's, from the environment (`Agentplane` outside a deploy).
pub fn namespace() -> String {
    std::env::var("AGENTPLANE_METRICS_NAMESPACE")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "Agentplane".into())
}

/// One EMF document: each metric a count, no dimensions (the namespace is the stack's).
pub fn document(namespace: &str, metrics: &[(&str, u64)], at_ms: u128) -> Value {
    let names: Vec<Value> = metrics.iter().map(|(name, _)| json!({"Name": name, "Unit": "Count"})).collect();
    let mut doc = Map::new();
    doc.insert(
        "_aws".to_owned(),
        json!({
            "Timestamp": at_ms,
            "CloudWatchMetrics": [{"Namespace": namespace, "Dimensions": [[]], "Metrics": names}],
        }),
    );
    // Lambda's JSON log format filters application lines by their `level`: a metric always passes.
    doc.insert("level".to_owned(), Value::from("INFO"));
    for (name, value) in metrics {
        doc.insert((*name).to_owned(), Value::from(*value));
    }
    Value::Object(doc)
}

fn now_ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or_default()
}

/// Writes one EMF line of `metrics` to `out`.
pub fn write_to(out: &mut impl Write, metrics: &[(&str, u64)]) {
    if metrics.is_empty() {
        return;
    }
    let line = document(&namespace(), metrics, now_ms());
    // A lost metric line must not fail the job: the alarm is the operator's, the work is ours.
    let _ = writeln!(out, "{line}");
}

/// Writes one EMF line of `metrics` to standard output (the function's log).
pub fn emit(metrics: &[(&str, u64)]) {
    write_to(&mut std::io::stdout().lock(), metrics);
}

/// The layer that turns metric events ([`METRIC_TARGET`]) into EMF lines, whatever `RUST_LOG`
/// says of the log lines.
pub struct Emf<W> {
    writer: W,
}

impl<W> Emf<W> {
    pub fn new(writer: W) -> Self {
        Self { writer }
    }
}

/// The `metric` and `count` fields of a metric event.
#[derive(Default)]
struct Metric {
    name: Option<String>,
    count: Option<u64>,
}

impl Visit for Metric {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "metric" {
            self.name = Some(value.to_owned());
        }
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "count" {
            self.count = Some(value);
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "count" {
            self.count = u64::try_from(value).ok();
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "metric" && self.name.is_none() {
            self.name = Some(format!("{value:?}").trim_matches('"').to_owned());
        }
    }
}

impl<S, W> Layer<S> for Emf<W>
where
    S: Subscriber,
    W: for<'w> MakeWriter<'w> + 'static,
{
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() != METRIC_TARGET {
            return;
        }
        let mut metric = Metric::default();
        event.record(&mut metric);
        if let Some(name) = metric.name {
            write_to(&mut self.writer.make_writer(), &[(&name, metric.count.unwrap_or(1))]);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn lines(out: &Captured) -> Vec<Value> {
        let text = String::from_utf8(out.0.lock().expect("lines").clone()).expect("utf-8");
        text.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect()
    }

    /// What CloudWatch requires of an EMF line: `_aws.Timestamp` in ms, one directive naming the
    /// namespace, dimension sets and metrics, and each metric's value at the top level.
    fn assert_emf(line: &Value, expected: &[(&str, u64)]) {
        let directive = &line["_aws"]["CloudWatchMetrics"][0];
        assert!(line["_aws"]["Timestamp"].as_u64().is_some_and(|t| t > 1_600_000_000_000), "{line}");
        assert_eq!(directive["Namespace"], namespace(), "{line}");
        assert_eq!(directive["Dimensions"], json!([[]]), "{line}");
        assert_eq!(line["level"], "INFO", "passes Lambda's log level filter: {line}");
        let names: Vec<&str> = directive["Metrics"]
            .as_array()
            .expect("Metrics")
            .iter()
            .filter_map(|m| m["Name"].as_str())
            .collect();
        assert_eq!(names, expected.iter().map(|(n, _)| *n).collect::<Vec<_>>(), "{line}");
        for (name, value) in expected {
            assert_eq!(line[*name].as_u64(), Some(*value), "{name} in {line}");
            assert!(ALL.contains(name), "{name} is a metric the template knows");
        }
    }

    #[test]
    fn a_metric_event_becomes_an_emf_line_whatever_the_log_level() {
        let out = Captured::default();
        let writer = out.clone();
        let log_filter = tracing_subscriber::filter::Targets::new().with_default(tracing::Level::ERROR);
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink).with_filter(log_filter))
            .with(Emf::new(move || writer.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: METRIC_TARGET, metric = WEBHOOK_ENDPOINTS_DISABLED, "an endpoint was disabled");
            tracing::warn!(metric = WEBHOOK_ENDPOINTS_DISABLED, "not the metric target: no line");
        });
        let lines = lines(&out);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_emf(&lines[0], &[(WEBHOOK_ENDPOINTS_DISABLED, 1)]);
    }

    #[test]
    fn the_retention_pass_reports_stuck_runs_as_emf() {
        let mut out = Captured::default();
        let pass =
            crate::jobs::RetentionPass { dead_runs_settled: 2, outbox_runs_sent: 3, ..Default::default() };
        write_to(&mut out, &crate::jobs::stuck_work_metrics(&pass));
        let lines = lines(&out);
        assert_eq!(lines.len(), 1);
        assert_emf(
            &lines[0],
            &[(BACKGROUND_RUNS_PAST_LEASE, 2), (PLATFORM_RUNS_RESENT, 3), (ROLLBACKS_GIVEN_UP, 0)],
        );
    }
}
