//! The sampler job: once per sampling interval, one runtime sample for every allocation that is
//! not stopped, unavailable ones included, each carrying its Session's measured token usage.
//! Samples are keyed by allocation and interval start, so a repeated pass in the same interval
//! writes nothing twice. The sampler reads providers and records; it never changes compute.

use crate::ports::{Allocation, LiveAllocations, PortError, SampleLog, SessionReader};
use agentplane_domain::telemetry::observation::{ObservationError, needs_provider_read};
use agentplane_domain::telemetry::observation_wire::LifecycleState;
use agentplane_domain::telemetry::{
    AllocationId, ObservationRecords, ProviderRead, Reason, RuntimeSample, SampleAllocation, SampleStatus,
    TokenUsage, runtime_observation,
};
use agentplane_domain::{SessionId, Timestamp};
use futures_util::StreamExt;
use std::collections::HashMap;

use super::{RuntimeTelemetry, SourceReading};

/// Samples one write carries (TransactWriteItems takes 100 conditional puts).
const WRITE_BATCH: usize = 100;
/// Sample writes under way at once.
const WRITE_CONCURRENCY: usize = 4;

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SamplerReport {
    pub interval_start: i64,
    pub allocations: usize,
    /// Samples written by this pass.
    pub written: usize,
    /// Allocations that already had a sample of this interval.
    pub duplicates: usize,
    pub observed: usize,
    pub unavailable: usize,
    /// Allocations whose sample could not be stored (storage failed).
    pub failed: usize,
}

enum Outcome {
    Written { observed: bool },
    Duplicate,
    Failed,
}

/// One sampler pass at `now`: one listing of the live allocations, their Sessions' usage in
/// batches, provider reads in batches where the source can batch (the local source reads 100
/// sandboxes' counters a request), then the conditional sample writes, a bounded number at once.
pub async fn sample_once<S: LiveAllocations + SessionReader + SampleLog>(
    store: &S,
    config: &RuntimeTelemetry,
    now: Timestamp,
) -> Result<SamplerReport, PortError> {
    let interval = config.interval.seconds();
    let seconds = now.unix_seconds();
    let interval_start = seconds - seconds.rem_euclid(interval);
    let allocations = store.live_allocations().await?;
    let mut report =
        SamplerReport { interval_start, allocations: allocations.len(), ..SamplerReport::default() };
    // The Sessions' measured usage, read in batches; a failed read leaves samples without it.
    let keys: Vec<_> = allocations.iter().map(|a| (a.project_id, a.session_id)).collect();
    let sessions = match store.sessions_by_id(&keys).await {
        Ok(sessions) => sessions,
        Err(err) => {
            tracing::warn!(error = %err, "reading session usage for runtime samples failed");
            Default::default()
        }
    };
    let live: Vec<&Allocation> =
        allocations.iter().filter(|a| a.record.state.lifecycle() != LifecycleState::Stopped).collect();
    let to_read: Vec<&Allocation> =
        live.iter().copied().filter(|a| needs_provider_read(&records(a))).collect();
    let readings = config.sources.read_many(&to_read, now).await;
    let mut readings: HashMap<AllocationId, SourceReading> =
        to_read.iter().map(|a| a.record.allocation_id).zip(readings).collect();
    // Owned rows, so the write stream's futures hold no borrow of this pass (it is spawned).
    let samples: Vec<(AllocationId, SessionId, RuntimeSample)> = live
        .into_iter()
        .map(|allocation| {
            let usage = sessions.get(&allocation.session_id).map(|s| TokenUsage {
                input_tokens: s.usage.input_tokens,
                output_tokens: s.usage.output_tokens,
            });
            let reading = readings.remove(&allocation.record.allocation_id);
            let sample = sample_of(allocation, reading, usage, now);
            (allocation.record.allocation_id, allocation.session_id, sample)
        })
        .collect();
    let mut batches: Vec<Vec<(AllocationId, SessionId, RuntimeSample)>> = Vec::new();
    for row in samples {
        match batches.last_mut() {
            Some(batch) if batch.len() < WRITE_BATCH => batch.push(row),
            _ => batches.push(vec![row]),
        }
    }
    // Conditional writes, 100 to a transaction, a few transactions at once.
    let mut chunks = futures_util::stream::iter(batches)
        .map(|batch| async move {
            let rows: Vec<_> =
                batch.iter().map(|(_, session, sample)| (*session, interval_start, sample.clone())).collect();
            let results = store.put_samples(&rows).await;
            batch
                .iter()
                .zip(results)
                .map(|((allocation, _, sample), result)| match result {
                    Ok(true) => Outcome::Written { observed: sample.is_observed() },
                    Ok(false) => Outcome::Duplicate,
                    Err(err) => {
                        tracing::warn!(allocation = %allocation, error = %err, "storing a runtime sample failed");
                        Outcome::Failed
                    }
                })
                .collect::<Vec<_>>()
        })
        .buffer_unordered(WRITE_CONCURRENCY);
    while let Some(outcomes) = chunks.next().await {
        for outcome in outcomes {
            match outcome {
                Outcome::Written { observed } => {
                    report.written += 1;
                    if observed {
                        report.observed += 1;
                    } else {
                        report.unavailable += 1;
                    }
                }
                Outcome::Duplicate => report.duplicates += 1,
                Outcome::Failed => report.failed += 1,
            }
        }
    }
    Ok(report)
}

/// The records an observation of a managed allocation is resolved from.
fn records(allocation: &Allocation) -> ObservationRecords<'_> {
    ObservationRecords {
        session_id: allocation.session_id,
        mode: agentplane_domain::session::EnvironmentMode::OpenaiHosted,
        environment_id: Some(allocation.environment_id),
        allocation: Some(&allocation.record),
    }
}

/// The sample of one allocation, with its Session's measured usage; `None` for a stopped one
/// (nothing to sample).
pub async fn take_sample(
    config: &RuntimeTelemetry,
    allocation: &Allocation,
    token_usage: Option<TokenUsage>,
    now: Timestamp,
) -> Option<RuntimeSample> {
    if allocation.record.state.lifecycle() == LifecycleState::Stopped {
        return None;
    }
    let reading = if needs_provider_read(&records(allocation)) {
        Some(config.sources.read(allocation, now).await)
    } else {
        None
    };
    Some(sample_of(allocation, reading, token_usage, now))
}

/// The sample of a live allocation given its provider reading (`None`: nothing to read yet).
fn sample_of(
    allocation: &Allocation,
    reading: Option<SourceReading>,
    token_usage: Option<TokenUsage>,
    now: Timestamp,
) -> RuntimeSample {
    let records = records(allocation);
    let status = match reading.as_ref().map(|r| &r.read) {
        None => SampleStatus::Unavailable { reason: Reason::AllocationPending },
        Some(ProviderRead::Sampled(sample)) => {
            // Evidence the observation rules refuse is never stored as a sample.
            match runtime_observation(&records, reading.as_ref().map(|r| &r.read), now) {
                Ok(_) => SampleStatus::Observed { readings: sample.readings.clone() },
                Err(ObservationError::InvalidEvidence | ObservationError::InconsistentIdentity) => {
                    SampleStatus::Unavailable { reason: Reason::SampleUnavailable }
                }
            }
        }
        Some(ProviderRead::NotRunning) => SampleStatus::Unavailable { reason: Reason::RuntimeNotRunning },
        Some(ProviderRead::SourceNotConfigured) => {
            SampleStatus::Unavailable { reason: Reason::SourceNotConfigured }
        }
        Some(ProviderRead::Timeout) => SampleStatus::Unavailable { reason: Reason::SampleTimeout },
        Some(ProviderRead::Unavailable) => SampleStatus::Unavailable { reason: Reason::SampleUnavailable },
    };
    let observed = matches!(status, SampleStatus::Observed { .. });
    RuntimeSample {
        sampled_at: now,
        allocation: Some(SampleAllocation {
            allocation_id: allocation.record.allocation_id,
            environment_id: allocation.environment_id,
            provider_type: allocation.record.provider_type.clone(),
            compute_started_at: if observed { reading.and_then(|r| r.compute_started_at) } else { None },
        }),
        status,
        token_usage,
    }
}
