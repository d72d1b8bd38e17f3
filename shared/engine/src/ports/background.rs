//! What background runs read and write: the run and the tenant slot it runs in, the sweep of
//! runs whose executor died, and the turns a tenant's spend limit paused.

use super::OutboxEvent;
use agentplane_domain::agent_run::RunError;
use agentplane_domain::pricing::Usage;
use agentplane_domain::session::StopReason;
use serde::{Deserialize, Serialize};
use std::future::Future;

use agentplane_domain::agent::Agent;
use agentplane_domain::agent_run::{AgentRun, RunId, RunStatus};
use agentplane_domain::ids::AgentId;
use agentplane_domain::session::Session;
use agentplane_domain::{ProjectId, SessionId, Timestamp};

use super::PortError;
use super::queues::Queues;
use super::sessions::{Admission, Continuations};

/// Running a background run: the run, its tenant's slots, and what its end announces (its
/// event and callback go out on the webhooks queue, its handover on the runs queue).
pub trait BackgroundRuns: Admission + Queues + Send + Sync {
    /// The run `id` of `project`; `NotFound` when there is none.
    fn agent_run(
        &self,
        project: &ProjectId,
        id: &RunId,
    ) -> impl Future<Output = Result<AgentRun, PortError>> + Send;

    /// Moves the run from `from` to `running` and takes a free slot of `tenant_key` (one of
    /// `max`) for it, both leased until `lease_until`; a run that holds a slot already goes on
    /// in it. Refused (the inner `Err`): `NoSlot` when every slot is held, `NotStartable` when
    /// the run is not in `from` (or, from a waiting status, a cancel was asked).
    fn start_run(
        &self,
        run: &AgentRun,
        from: RunStatus,
        tenant_key: &str,
        max: u32,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> impl Future<Output = Result<Result<SlotRef, StartRefused>, PortError>> + Send;

    /// Renews the run's hold on `slot` and its own lease until `lease_until`; `Conflict` when
    /// the slot is another's now or the run is not running any more.
    fn renew_run(
        &self,
        slot: &SlotRef,
        run: &AgentRun,
        lease_until: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Records how the running run's turn stopped and gives `slot` back, with what `announce`
    /// holds, all at once; `Conflict` when the run was not running (another writer ended it).
    fn settle_run(
        &self,
        run: &AgentRun,
        slot: Option<&SlotRef>,
        outcome: &RunOutcome,
        announce: Announce<'_>,
        now: Timestamp,
    ) -> impl Future<Output = Result<AgentRun, PortError>> + Send;
}

/// Settling running runs whose lease lapsed (their executor died), and releasing the session
/// their turn held.
pub trait LapsedRuns: Queues + Send + Sync {
    /// Up to `limit` running runs whose lease lapsed at `now`, the oldest lease first.
    fn lapsed_runs(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<AgentRun>, PortError>> + Send;

    /// Settles the run whose lease lapsed at `now` as `outcome`, with what `announce` holds, its
    /// slot left to lapse; `Conflict` when it is not running or its lease was renewed meanwhile,
    /// `NotFound` when it is gone.
    fn settle_lapsed_run(
        &self,
        run: &AgentRun,
        outcome: &RunOutcome,
        announce: Announce<'_>,
        now: Timestamp,
    ) -> impl Future<Output = Result<AgentRun, PortError>> + Send;

    /// Releases the session the dead turn `turn_id` held (idle again, stopped by `error`);
    /// `false` when that turn no longer holds it.
    fn release_dead_turn(
        &self,
        project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
        now: Timestamp,
    ) -> impl Future<Output = Result<bool, PortError>> + Send;
}

/// Carrying on the turns a tenant's monthly limit paused: the noted pauses, the sessions they
/// name, the agents whose budget applies, and the continuations sent for them.
pub trait TenantResume: Admission + Continuations + Send + Sync {
    /// The noted pauses of the tenant key `tenant_key`.
    fn tenant_pauses_of(
        &self,
        tenant_key: &str,
    ) -> impl Future<Output = Result<Vec<TenantPause>, PortError>> + Send;

    /// Every noted pause, of every tenant.
    fn all_tenant_pauses(&self) -> impl Future<Output = Result<Vec<TenantPause>, PortError>> + Send;

    /// Forgets the noted pause (nothing when it is gone already).
    fn forget_tenant_pause(&self, pause: &TenantPause) -> impl Future<Output = Result<(), PortError>> + Send;

    /// The live session `id` of `project`; `NotFound` when it is missing or deleted.
    fn session(
        &self,
        project: &ProjectId,
        id: &SessionId,
    ) -> impl Future<Output = Result<Session, PortError>> + Send;

    /// The agent `id` of `project`; `NotFound` when there is none.
    fn agent(
        &self,
        project: &ProjectId,
        id: &AgentId,
    ) -> impl Future<Output = Result<Agent, PortError>> + Send;
}

/// Where a run holds its slot (a tenant key and an index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRef {
    pub tenant_key: String,
    pub index: u32,
}

/// Why a run could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartRefused {
    /// Every slot of the tenant is held: the run waits queued.
    NoSlot,
    /// The run is not in the status the start expected (started already, canceled, gone).
    NotStartable,
}

/// What a run's move announces, written with it: the `agent_run.*` event and the callback's
/// signed message.
#[derive(Debug, Clone, Copy, Default)]
pub struct Announce<'a> {
    pub event: Option<&'a OutboxEvent>,
    pub callback: Option<&'a agentplane_domain::webhook::Message>,
}

/// How a run ends or pauses: what the executor writes when its turn stops.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    pub status: RunStatus,
    pub stop_reason: Option<StopReason>,
    pub output_text: Option<String>,
    pub error: Option<RunError>,
    pub usage: Usage,
    pub cost_usd: f64,
    pub pending_action_ids: Vec<String>,
    /// The callback the run's end owes, recorded with it.
    pub callback: Option<agentplane_domain::agent_run::CallbackRecord>,
}

/// A session whose turn the limit of the tenant `tenant_key` paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantPause {
    pub tenant_key: String,
    pub project_id: ProjectId,
    pub session_id: SessionId,
}
