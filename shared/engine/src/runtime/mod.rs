//! Runtime telemetry, the impure half: observation sources (one per provider type), the sampler
//! that records a runtime sample of every live allocation each interval, and their settings.
//! The rules (status, reasons, history arithmetic) live in `agentplane_domain::telemetry`.

pub mod sampler;
pub mod sources;

use std::time::Duration;

use crate::ports::SandboxCounterLog;
use agentplane_domain::telemetry::SamplingInterval;

pub use sampler::{SamplerReport, sample_once};
pub use sources::{LOCAL_PROVIDER, LocalUsageSource, ObservationSource, ObservationSources, SourceReading};

/// How Core observes and samples Runtimes.
#[derive(Debug, Clone)]
pub struct RuntimeTelemetry {
    pub sources: ObservationSources,
    pub interval: SamplingInterval,
    /// Whether a sampler records periodic history. Without one, history reads answer 503.
    pub history_enabled: bool,
    /// The most time the observation list may spend collecting one page.
    pub list_budget: Duration,
    /// The most time a history read may take.
    pub history_deadline: Duration,
}

impl RuntimeTelemetry {
    /// The local provider over `store`, with settings from the environment:
    /// `AGENTPLANE_SAMPLING_INTERVAL_S` (default 30), `AGENTPLANE_SAMPLER` (`off` disables
    /// periodic history), `AGENTPLANE_SAMPLE_TIMEOUT_MS` (provider read deadline, default 2000),
    /// `AGENTPLANE_SAMPLE_STALE_S` (counters older than this are not a current sample; default
    /// three intervals).
    pub fn from_env<C: SandboxCounterLog + Clone + std::fmt::Debug + 'static>(store: &C) -> Self {
        let var = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok());
        let interval_s = var("AGENTPLANE_SAMPLING_INTERVAL_S")
            .and_then(|v| u32::try_from(v).ok())
            .and_then(SamplingInterval::from_seconds)
            .unwrap_or_default();
        let deadline = Duration::from_millis(var("AGENTPLANE_SAMPLE_TIMEOUT_MS").unwrap_or(2000));
        let stale = Duration::from_secs(
            var("AGENTPLANE_SAMPLE_STALE_S").unwrap_or(3 * u64::try_from(interval_s.seconds()).unwrap_or(30)),
        );
        let enabled = std::env::var("AGENTPLANE_SAMPLER").map(|v| v != "off").unwrap_or(true);
        Self {
            sources: ObservationSources::new(deadline)
                .with(LOCAL_PROVIDER, LocalUsageSource::new(store.clone(), stale)),
            interval: interval_s,
            history_enabled: enabled,
            list_budget: Duration::from_secs(10),
            history_deadline: Duration::from_secs(10),
        }
    }
}
