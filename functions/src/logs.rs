//! The functions' log lines: one JSON object per line, with what an operator filters on at the
//! top level — `requestId` and `traceId` (the Lambda runtime's invocation span:
//! `lambda_runtime::layers::trace::request_span`), `project` (the request span's, recorded once
//! the project key is authenticated), `level`, `message` and the event's own fields — so a Logs
//! Insights query reads `filter project = "proj_…"` rather than digging through a span list.
//! Lambda stamps each line with its time; the function's log group holds them
//! (`LoggingConfig` in infra/template.yaml).

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The span every routed request runs in: its `project` is empty until the key is authenticated
/// (`shared/api/src/client/auth.rs` records it on the current span).
pub fn request_span() -> tracing::Span {
    tracing::info_span!("request", project = tracing::field::Empty)
}

/// Span field names as the log line calls them (Lambda's `xrayTraceId` is the trace id).
fn top_level_name(name: &str) -> &str {
    match name {
        "xrayTraceId" => "traceId",
        other => other,
    }
}

/// Formats each event as one flat JSON object (spans' fields first, outermost to innermost, then
/// the event's own, which win a clash). Span fields are kept as `JsonFields` writes them.
pub struct FlatJson;

impl<S, N> FormatEvent<S, N> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        line.insert("level".to_owned(), Value::from(event.metadata().level().as_str()));
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(fields) = extensions.get::<FormattedFields<N>>() else { continue };
                if let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(fields.as_str()) {
                    for (name, value) in fields {
                        line.insert(top_level_name(&name).to_owned(), value);
                    }
                }
            }
        }
        event.record(&mut Fields(&mut line));
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// The span fields' format [`FlatJson`] reads back.
pub fn span_fields() -> JsonFields {
    JsonFields::new()
}

struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), Value::from(format!("{value:?}")));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// Lines written by a subscriber under test.
    #[derive(Clone, Default)]
    pub(crate) struct Captured(pub(crate) Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        pub(crate) fn lines(&self) -> Vec<Value> {
            let bytes = self.0.lock().expect("lines").clone();
            String::from_utf8(bytes)
                .expect("utf-8")
                .lines()
                .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
                .collect()
        }
    }

    #[test]
    fn a_request_log_line_carries_the_request_id_trace_id_and_project_at_the_top_level() {
        let out = Captured::default();
        let writer = out.clone();
        let layer = tracing_subscriber::fmt::layer()
            .event_format(FlatJson)
            .fmt_fields(span_fields())
            .with_writer(move || writer.clone());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            // The span lambda_runtime opens per invocation (layers::trace::request_span).
            let invoke = tracing::info_span!(
                "Lambda runtime invoke",
                requestId = "8f5c2e1a-req",
                xrayTraceId = "Root=1-abc-def"
            );
            let _invoke = invoke.enter();
            let request = request_span();
            let _request = request.enter();
            tracing::info!("before auth");
            // What authentication does once the key is known.
            tracing::Span::current().record("project", "proj_123");
            tracing::warn!(status = 429u64, "after auth");
        });
        let lines = out.lines();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0]["requestId"], "8f5c2e1a-req");
        assert_eq!(lines[0]["traceId"], "Root=1-abc-def");
        assert_eq!(lines[0]["message"], "before auth");
        assert_eq!(lines[0]["level"], "INFO");
        assert!(lines[0].get("project").is_none(), "no project before auth: {}", lines[0]);
        assert_eq!(lines[1]["project"], "proj_123");
        assert_eq!(lines[1]["requestId"], "8f5c2e1a-req");
        assert_eq!(lines[1]["traceId"], "Root=1-abc-def");
        assert_eq!(lines[1]["status"], 429);
        assert_eq!(lines[1]["level"], "WARN");
        assert!(lines[1].get("spans").is_none() && lines[1].get("fields").is_none(), "flat: {}", lines[1]);
    }
}
