//! What a client's requests about background runs write: the run queued with its event, moved
//! while it is not running (a cancel of a queued or waiting run), or asked to stop while it runs.

use std::future::Future;

use agentplane_domain::ProjectId;
use agentplane_domain::Timestamp;
use agentplane_domain::agent_run::{AgentRun, RunId, RunStatus};

use super::background::{BackgroundRuns, TenantResume};
use super::platform::RunSessions;
use super::{OutboxEvent, PortError};

/// A client's background runs. The run is [`BackgroundRuns`]', its session
/// [`TenantResume`]'s, the cancel recorded for its turn [`RunSessions`]'.
pub trait RunRequests: BackgroundRuns + TenantResume + RunSessions + Send + Sync {
    /// Writes the new run and the event announcing it (with it, or not at all).
    fn create_agent_run(
        &self,
        run: &AgentRun,
        emit: &OutboxEvent,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Moves a run that is not running from `from` to `to`, with the event announcing it, in
    /// one transaction; the run as written. `Conflict` when it is not in `from` any more.
    fn transition_agent_run(
        &self,
        project: &ProjectId,
        id: &RunId,
        from: RunStatus,
        to: RunStatus,
        emit: Option<&OutboxEvent>,
        now: Timestamp,
    ) -> impl Future<Output = Result<AgentRun, PortError>> + Send;

    /// Records a cancel of a running run (its turn stops at its next step); the run as
    /// written. `Conflict` when the run is not running.
    fn request_run_cancel(
        &self,
        project: &ProjectId,
        id: &RunId,
    ) -> impl Future<Output = Result<AgentRun, PortError>> + Send;
}
