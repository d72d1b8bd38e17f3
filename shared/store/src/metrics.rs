//! Counting the storage requests a `Store` really sends: an SDK interceptor that records every
//! request on the wire (each attempt, retries included) by service and operation, in order. For
//! the bench and the round-trip tests; only a store given a counter (`Store::with_op_counter`)
//! carries the interceptor, so the functions pay nothing.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;

/// One request sent: `DynamoDB`/`GetItem`, and the table it names at its top level (`None` for
/// the multi-table `BatchGetItem`/`TransactWriteItems`, and for S3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub service: String,
    pub operation: String,
    pub table: Option<String>,
}

impl Op {
    /// `GetItem`, or `S3.PutObject` for a service other than DynamoDB.
    pub fn name(&self) -> String {
        if self.service == "DynamoDB" {
            self.operation.clone()
        } else {
            format!("{}.{}", self.service, self.operation)
        }
    }
}

/// The requests a store sent, in order; cheap to clone (one shared list).
#[derive(Debug, Clone, Default)]
pub struct OpCounter {
    sent: Arc<Mutex<Vec<Op>>>,
}

impl OpCounter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything sent since the last `take`, and starts a new count.
    pub fn take(&self) -> Ops {
        Ops(std::mem::take(&mut *self.sent.lock().unwrap_or_else(PoisonError::into_inner)))
    }

    /// How many requests were sent since the last `take`.
    pub fn total(&self) -> usize {
        self.sent.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    fn record(&self, op: Op) {
        self.sent.lock().unwrap_or_else(PoisonError::into_inner).push(op);
    }

    /// The interceptor to attach to an SDK client's config.
    pub(crate) fn interceptor(&self) -> OpInterceptor {
        OpInterceptor { counter: self.clone() }
    }
}

/// A run of requests, in the order they were sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ops(pub Vec<Op>);

impl Ops {
    pub fn total(&self) -> usize {
        self.0.len()
    }

    /// How many of them were `operation` (an [`Op::name`]).
    pub fn count(&self, operation: &str) -> usize {
        self.0.iter().filter(|op| op.name() == operation).count()
    }

    /// Counts by operation name.
    pub fn by_name(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for op in &self.0 {
            *counts.entry(op.name()).or_default() += 1;
        }
        counts
    }

    /// The operation names, in order.
    pub fn names(&self) -> Vec<String> {
        self.0.iter().map(Op::name).collect()
    }
}

impl fmt::Display for Ops {
    /// `GetItem, BatchGetItem, TransactWriteItems x2`: in order, repeats run together.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut runs: Vec<(String, usize)> = Vec::new();
        for name in self.names() {
            match runs.last_mut() {
                Some((last, n)) if *last == name => *n += 1,
                _ => runs.push((name, 1)),
            }
        }
        let parts: Vec<String> =
            runs.into_iter().map(|(name, n)| if n == 1 { name } else { format!("{name} x{n}") }).collect();
        f.write_str(&parts.join(", "))
    }
}

/// Records each request as it goes on the wire (once per attempt).
#[derive(Debug)]
pub(crate) struct OpInterceptor {
    counter: OpCounter,
}

impl Intercept for OpInterceptor {
    fn name(&self) -> &'static str {
        "agentplane-op-counter"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let (service, operation) = cfg
            .load::<Metadata>()
            .map_or(("?".to_owned(), "?".to_owned()), |m| (m.service().to_owned(), m.name().to_owned()));
        let table =
            if service == "DynamoDB" { top_level_table(context.request().body().bytes()) } else { None };
        self.counter.record(Op { service, operation, table });
        Ok(())
    }
}

/// `TableName` of a DynamoDB JSON request body, when it has one at its top level.
fn top_level_table(body: Option<&[u8]>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named {
        #[serde(rename = "TableName")]
        table: Option<String>,
    }
    serde_json::from_slice::<Named>(body?).ok()?.table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(operation: &str) -> Op {
        Op { service: "DynamoDB".into(), operation: operation.into(), table: None }
    }

    #[test]
    fn display_runs_repeats_together_in_order() {
        let ops = Ops(vec![op("GetItem"), op("TransactWriteItems"), op("TransactWriteItems"), op("GetItem")]);
        assert_eq!(ops.to_string(), "GetItem, TransactWriteItems x2, GetItem");
        assert_eq!(ops.count("TransactWriteItems"), 2);
        assert_eq!(ops.by_name().get("GetItem"), Some(&2));
    }

    #[test]
    fn other_services_are_named_with_their_service() {
        let put = Op { service: "S3".into(), operation: "PutObject".into(), table: None };
        assert_eq!(put.name(), "S3.PutObject");
    }

    #[test]
    fn take_starts_a_new_count() {
        let counter = OpCounter::new();
        counter.record(op("GetItem"));
        assert_eq!(counter.total(), 1);
        assert_eq!(counter.take().total(), 1);
        assert_eq!(counter.total(), 0);
    }

    #[test]
    fn the_table_is_read_from_the_top_level_only() {
        assert_eq!(top_level_table(Some(br#"{"TableName":"t-events","Key":{}}"#)), Some("t-events".into()));
        assert_eq!(top_level_table(Some(br#"{"TransactItems":[{"Put":{"TableName":"x"}}]}"#)), None);
        assert_eq!(top_level_table(None), None);
    }
}
