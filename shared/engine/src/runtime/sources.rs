//! Where current Runtime values come from: one observation source per provider type. A read is
//! bounded by a deadline (past it: `sample_timeout`); an allocation whose provider has no source
//! is `source_not_configured`. Sources only read; they never create, wake or change compute.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::ports::{Allocation, SandboxCounterLog};
use agentplane_domain::Timestamp;
use agentplane_domain::telemetry::observation::ProviderSample;
use agentplane_domain::telemetry::{ComputeStart, ProviderRead, SampleReadings, SandboxCounters};

/// The provider type of allocations served by Agentplane's own sandbox nodes.
pub const LOCAL_PROVIDER: &str = "local";

/// One provider read and the compute incarnation it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceReading {
    pub read: ProviderRead,
    /// The start of the incarnation that produced the sample (with nanoseconds), when known.
    pub compute_started_at: Option<ComputeStart>,
}

impl SourceReading {
    pub fn without_sample(read: ProviderRead) -> Self {
        Self { read, compute_started_at: None }
    }
}

pub type ReadFuture<'a> = Pin<Box<dyn Future<Output = SourceReading> + Send + 'a>>;
pub type ReadManyFuture<'a> = Pin<Box<dyn Future<Output = Vec<SourceReading>> + Send + 'a>>;

/// Allocations one batched provider read covers (DynamoDB's BatchGetItem takes 100 keys).
pub const READ_BATCH: usize = 100;
/// Provider reads under way at once when a pass reads many allocations.
pub const READ_CONCURRENCY: usize = 32;

/// Reads the current values of one allocation's compute from its provider.
pub trait ObservationSource: Send + Sync + fmt::Debug {
    fn read<'a>(&'a self, allocation: &'a Allocation, now: Timestamp) -> ReadFuture<'a>;

    /// Reads up to [`READ_BATCH`] allocations at once, one reading each, in order. Only sources
    /// whose [`ObservationSource::batches`] is true are asked; the others are read one by one.
    fn read_many<'a>(&'a self, allocations: &'a [&'a Allocation], now: Timestamp) -> ReadManyFuture<'a> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(allocations.len());
            for allocation in allocations {
                out.push(self.read(allocation, now).await);
            }
            out
        })
    }

    /// Whether [`ObservationSource::read_many`] reads a batch in fewer calls than one per
    /// allocation.
    fn batches(&self) -> bool {
        false
    }
}

/// The sources by provider type, and the deadline every read gets.
#[derive(Clone)]
pub struct ObservationSources {
    by_provider: HashMap<String, Arc<dyn ObservationSource>>,
    deadline: Duration,
}

impl fmt::Debug for ObservationSources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut providers: Vec<&String> = self.by_provider.keys().collect();
        providers.sort();
        f.debug_struct("ObservationSources")
            .field("providers", &providers)
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl ObservationSources {
    /// No sources: every managed allocation is `source_not_configured`.
    pub fn new(deadline: Duration) -> Self {
        Self { by_provider: HashMap::new(), deadline }
    }

    /// Serves `provider_type` with `source` (replacing any earlier one).
    pub fn with(mut self, provider_type: &str, source: impl ObservationSource + 'static) -> Self {
        self.by_provider.insert(provider_type.to_owned(), Arc::new(source));
        self
    }

    pub fn without(mut self, provider_type: &str) -> Self {
        self.by_provider.remove(provider_type);
        self
    }

    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Reads `allocation` through its provider's source, within the deadline.
    pub async fn read(&self, allocation: &Allocation, now: Timestamp) -> SourceReading {
        let Some(source) = self.by_provider.get(&allocation.record.provider_type) else {
            return SourceReading::without_sample(ProviderRead::SourceNotConfigured);
        };
        match tokio::time::timeout(self.deadline, source.read(allocation, now)).await {
            Ok(reading) => reading,
            Err(_) => SourceReading::without_sample(ProviderRead::Timeout),
        }
    }

    /// Reads many allocations, one reading each, in order, at most [`READ_CONCURRENCY`] reads
    /// under way. A source that batches reads [`READ_BATCH`] allocations a call, the deadline
    /// bounding each call; the others get one deadline-bounded read per allocation.
    pub async fn read_many(&self, allocations: &[&Allocation], now: Timestamp) -> Vec<SourceReading> {
        use futures_util::StreamExt;

        // Jobs own what they name (no borrowed argument), so a spawned pass stays `Send`.
        enum Job {
            Batch(String, Vec<usize>),
            One(usize),
        }
        let mut readings: Vec<Option<SourceReading>> = vec![None; allocations.len()];
        let mut by_provider: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, a) in allocations.iter().enumerate() {
            by_provider.entry(a.record.provider_type.as_str()).or_default().push(i);
        }
        let mut jobs = Vec::new();
        for (provider, indices) in by_provider {
            match self.by_provider.get(provider) {
                Some(source) if source.batches() => {
                    for chunk in indices.chunks(READ_BATCH) {
                        jobs.push(Job::Batch(provider.to_owned(), chunk.to_vec()));
                    }
                }
                _ => jobs.extend(indices.into_iter().map(Job::One)),
            }
        }
        let mut done = futures_util::stream::iter(jobs)
            .map(|job| async move {
                match job {
                    Job::One(i) => vec![(i, self.read(allocations[i], now).await)],
                    Job::Batch(provider, indices) => {
                        let batch: Vec<&Allocation> = indices.iter().map(|i| allocations[*i]).collect();
                        let read = match self.by_provider.get(&provider) {
                            Some(source) => {
                                tokio::time::timeout(self.deadline, source.read_many(&batch, now)).await
                            }
                            None => Ok(Vec::new()),
                        };
                        match read {
                            Ok(out) if out.len() == indices.len() => indices.into_iter().zip(out).collect(),
                            // Past the deadline (or a source that lost count): no current sample.
                            Ok(_) => indices
                                .into_iter()
                                .map(|i| (i, SourceReading::without_sample(ProviderRead::Unavailable)))
                                .collect(),
                            Err(_) => indices
                                .into_iter()
                                .map(|i| (i, SourceReading::without_sample(ProviderRead::Timeout)))
                                .collect(),
                        }
                    }
                }
            })
            .buffer_unordered(READ_CONCURRENCY);
        while let Some(batch) = done.next().await {
            for (i, reading) in batch {
                readings[i] = Some(reading);
            }
        }
        readings
            .into_iter()
            .map(|r| r.unwrap_or_else(|| SourceReading::without_sample(ProviderRead::Unavailable)))
            .collect()
    }
}

/// The local provider: the latest counters a sandbox node reported for the allocation's sandbox
/// (the telemetry table's `SANDBOX#{id}`/`USAGE` record). Counters older than `stale_after` are
/// not a current sample.
#[derive(Debug, Clone)]
pub struct LocalUsageSource<C> {
    store: C,
    stale_after: Duration,
}

impl<C> LocalUsageSource<C> {
    pub fn new(store: C, stale_after: Duration) -> Self {
        Self { store, stale_after }
    }

    /// The reading of counters read at `now`: stale ones are no current sample.
    fn current(&self, usage: Option<&SandboxCounters>, now: Timestamp) -> SourceReading {
        let Some(usage) = usage else { return SourceReading::without_sample(ProviderRead::Unavailable) };
        let stale_ms = i64::try_from(self.stale_after.as_millis()).unwrap_or(i64::MAX);
        if now.unix_millis().saturating_sub(usage.reported_at.unix_millis()) > stale_ms {
            return SourceReading::without_sample(ProviderRead::Unavailable);
        }
        local_reading(usage)
    }
}

impl<C: SandboxCounterLog + fmt::Debug> ObservationSource for LocalUsageSource<C> {
    fn read<'a>(&'a self, allocation: &'a Allocation, now: Timestamp) -> ReadFuture<'a> {
        Box::pin(async move {
            let Some(sandbox_id) = allocation.sandbox() else {
                return SourceReading::without_sample(ProviderRead::Unavailable);
            };
            // A failed read is "could not produce a current sample"; its detail stays here.
            match self.store.sandbox_counters(sandbox_id).await {
                Ok(usage) => self.current(usage.as_ref(), now),
                Err(_) => SourceReading::without_sample(ProviderRead::Unavailable),
            }
        })
    }

    /// One BatchGetItem for the counters of up to 100 sandboxes.
    fn read_many<'a>(&'a self, allocations: &'a [&'a Allocation], now: Timestamp) -> ReadManyFuture<'a> {
        Box::pin(async move {
            let ids: Vec<&str> = allocations.iter().filter_map(|a| a.sandbox()).collect();
            let counters = match self.store.sandbox_counters_many(&ids).await {
                Ok(counters) => counters,
                Err(_) => {
                    return allocations
                        .iter()
                        .map(|_| SourceReading::without_sample(ProviderRead::Unavailable))
                        .collect();
                }
            };
            allocations
                .iter()
                .map(|a| self.current(a.sandbox().and_then(|id| counters.get(id)), now))
                .collect()
        })
    }

    fn batches(&self) -> bool {
        true
    }
}

/// What the node's counters say, as a provider read.
pub fn local_reading(usage: &SandboxCounters) -> SourceReading {
    if !usage.running {
        return SourceReading::without_sample(ProviderRead::NotRunning);
    }
    let started_at = usage.compute_started_at.map(ComputeStart::to_timestamp);
    SourceReading {
        read: ProviderRead::Sampled(ProviderSample {
            observed_at: usage.reported_at,
            started_at,
            readings: SampleReadings {
                cpu_seconds_total: usage.cpu_seconds_total,
                utilization_ratio: None,
                capacity_cores: usage.capacity_cores,
                memory_usage_bytes: usage.memory_usage_bytes,
                memory_limit_bytes: usage.memory_limit_bytes,
            },
            disk: None,
        }),
        compute_started_at: usage.compute_started_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(running: bool) -> SandboxCounters {
        SandboxCounters {
            sandbox_id: "sbx".into(),
            cpu_seconds_total: Some(1.5),
            memory_usage_bytes: Some(10),
            memory_limit_bytes: None,
            capacity_cores: Some(2.0),
            compute_started_at: ComputeStart::new(100, 750_000_000),
            running,
            reported_at: Timestamp::from_unix_seconds(200),
        }
    }

    #[test]
    fn local_counters_become_a_sample_of_their_incarnation() {
        let reading = local_reading(&usage(true));
        assert_eq!(reading.compute_started_at, ComputeStart::new(100, 750_000_000));
        let ProviderRead::Sampled(sample) = reading.read else { panic!("sampled") };
        assert_eq!(sample.started_at, Some(Timestamp::from_unix_millis(100_750)));
        assert_eq!(sample.observed_at, Timestamp::from_unix_seconds(200));
        assert_eq!(sample.readings.cpu_seconds_total, Some(1.5));
        assert_eq!(sample.disk, None);
    }

    #[test]
    fn a_sandbox_the_node_reports_stopped_is_not_running() {
        assert_eq!(local_reading(&usage(false)).read, ProviderRead::NotRunning);
    }
}
