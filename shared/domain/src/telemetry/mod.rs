//! Runtime telemetry, the pure half: query validation and bucket arithmetic for Runtime history,
//! the history response built from stored samples, the Runtime observation of one Session, and
//! sandbox node host CPU and history. Callers pass `now`/`generated_at`; nothing here reads a
//! clock, storage or the network. The rules are those of `runtime-telemetry-api.md`.

pub mod check;
pub mod counters;
pub mod history;
pub mod history_query;
pub mod history_wire;
pub mod ids;
pub mod node;
pub mod node_host;
pub mod observation;
pub mod observation_wire;
pub mod sample;
pub mod wire;

pub use counters::SandboxCounters;
pub use history::{HistoryError, build_runtime_history};
pub use history_query::{BucketPlan, HistoryQuery, HistoryQueryError, SamplingInterval};
pub use history_wire::RuntimeHistory;
pub use ids::{AllocationId, DeviceId, EnvironmentId, NodeId};
pub use node::{CpuCounters, HostObservation, NodeHistory, NodeObservation, NodeRange, ProcStatCpu};
pub use observation::{
    AllocationRecord, AllocationState, ObservationRecords, ProviderRead, runtime_observation,
};
pub use observation_wire::{AdminRuntimeObservation, RuntimeObservation, RuntimeObservationList};
pub use sample::{
    ComputeStart, Reason, RuntimeSample, SampleAllocation, SampleReadings, SampleStatus, TokenUsage,
};
