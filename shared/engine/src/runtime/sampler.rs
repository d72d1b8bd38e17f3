//! The sampler job: once per sampling interval, one runtime sample for every allocation that is
//! not stopped, unavailable ones included, each carrying its Session's measured token usage.
//! Samples are keyed by allocation and interval start, so a repeated pass in the same interval
//! writes nothing twice. The sampler reads providers and records; it never changes compute.

use agentplane_domain::Timestamp;
use agentplane_domain::telemetry::observation::{ObservationError, needs_provider_read};
use agentplane_domain::telemetry::observation_wire::LifecycleState;
use agentplane_domain::telemetry::{
    ObservationRecords, ProviderRead, Reason, RuntimeSample, SampleAllocation, SampleStatus, TokenUsage,
    runtime_observation,
};
use agentplane_store::{Allocation, Store, StoreError};
use futures_util::StreamExt;

use super::RuntimeTelemetry;

/// Allocations sampled at once.
const CONCURRENCY: usize = 32;

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
    Skipped,
    Failed,
}

/// One sampler pass at `now`.
pub async fn sample_once(
    store: &Store,
    config: &RuntimeTelemetry,
    now: Timestamp,
) -> Result<SamplerReport, StoreError> {
    let interval = config.interval.seconds();
    let seconds = now.unix_seconds();
    let interval_start = seconds - seconds.rem_euclid(interval);
    let allocations = store.allocations().list_live().await?;
    let mut report =
        SamplerReport { interval_start, allocations: allocations.len(), ..SamplerReport::default() };
    // The Sessions' measured usage, read in batches; a failed read leaves samples without it.
    let keys: Vec<_> = allocations.iter().map(|a| (a.project_id, a.session_id)).collect();
    let sessions = match store.sessions().get_many(&keys).await {
        Ok(sessions) => sessions,
        Err(err) => {
            tracing::warn!(error = %err, "reading session usage for runtime samples failed");
            Default::default()
        }
    };
    let sessions = &sessions;
    // Owned allocations keep the stream's future free of higher-ranked borrows (so it can be spawned).
    let mut outcomes = futures_util::stream::iter(allocations)
        .map(|allocation| async move {
            let usage = sessions.get(&allocation.session_id).map(|s| TokenUsage {
                input_tokens: s.usage.input_tokens,
                output_tokens: s.usage.output_tokens,
            });
            sample_allocation(store, config, &allocation, usage, interval_start, now).await
        })
        .buffer_unordered(CONCURRENCY);
    while let Some(outcome) = outcomes.next().await {
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
            Outcome::Skipped => {}
            Outcome::Failed => report.failed += 1,
        }
    }
    Ok(report)
}

async fn sample_allocation(
    store: &Store,
    config: &RuntimeTelemetry,
    allocation: &Allocation,
    token_usage: Option<TokenUsage>,
    interval_start: i64,
    now: Timestamp,
) -> Outcome {
    let sample = match take_sample(config, allocation, token_usage, now).await {
        Some(sample) => sample,
        None => return Outcome::Skipped,
    };
    let observed = sample.is_observed();
    match store.telemetry().put_sample(&allocation.session_id, interval_start, &sample).await {
        Ok(true) => Outcome::Written { observed },
        Ok(false) => Outcome::Duplicate,
        Err(err) => {
            tracing::warn!(allocation = %allocation.record.allocation_id, error = %err, "storing a runtime sample failed");
            Outcome::Failed
        }
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
    let lifecycle = allocation.record.state.lifecycle();
    if lifecycle == LifecycleState::Stopped {
        return None;
    }
    let records = ObservationRecords {
        session_id: allocation.session_id,
        mode: agentplane_domain::session::EnvironmentMode::OpenaiHosted,
        environment_id: Some(allocation.environment_id),
        allocation: Some(&allocation.record),
    };
    let reading =
        if needs_provider_read(&records) { Some(config.sources.read(allocation, now).await) } else { None };
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
    Some(RuntimeSample {
        sampled_at: now,
        allocation: Some(SampleAllocation {
            allocation_id: allocation.record.allocation_id,
            environment_id: allocation.environment_id,
            provider_type: allocation.record.provider_type.clone(),
            compute_started_at: if observed { reading.and_then(|r| r.compute_started_at) } else { None },
        }),
        status,
        token_usage,
    })
}
