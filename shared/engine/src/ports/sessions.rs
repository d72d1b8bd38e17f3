//! What the use cases around a turn read and write of sessions: admitting a turn (its agent, the
//! config its channel runs, the session with its transcript, the tenant's spend), carrying a
//! paused turn on, handing commands to a sandbox's node, and the model calls made for a session
//! outside its turns (its title).

use agentplane_domain::event::NewEvent;
use agentplane_domain::pricing::Usage;
use std::future::Future;

use agentplane_domain::action::Action;
use agentplane_domain::agent::{Agent, Channel, VersionedConfig};
use agentplane_domain::event::Event;
use agentplane_domain::ids::AgentId;
use agentplane_domain::project::Project;
use agentplane_domain::session::{Session, Title};
use agentplane_domain::tenant::{Tenant, TenantId};
use agentplane_domain::{ProjectId, SessionId, Timestamp};

use super::queues::Queues;
use super::{PortError, StoredTranscript};

/// What admitting a turn reads: the agent and the config its channel runs, the session with its
/// transcript, the project and its tenant, and what the tenant spent.
pub trait Admission: Send + Sync {
    /// The project `id`; `NotFound` when there is none.
    fn project(&self, id: &ProjectId) -> impl Future<Output = Result<Project, PortError>> + Send;

    /// The agent `id` of `project`, with its project's tenant and whether the project has any
    /// webhook endpoint, in one read; `NotFound` when the project has no such agent.
    fn agent_for_turn(
        &self,
        project: &ProjectId,
        id: &AgentId,
    ) -> impl Future<Output = Result<TurnAgent, PortError>> + Send;

    /// The config `agent` runs on `channel`: its draft, or a published version (`pinned`, else
    /// the newest) with its number; `None` when the agent has no published version.
    fn agent_config(
        &self,
        agent: &Agent,
        channel: Channel,
        pinned: Option<u32>,
    ) -> impl Future<Output = Result<Option<(VersionedConfig, Option<u32>)>, PortError>> + Send;

    /// A live session of `project` and its transcript (`None`: none yet), in one consistent
    /// read; `NotFound` when the session is missing or deleted.
    fn session_with_transcript(
        &self,
        project: &ProjectId,
        id: &SessionId,
    ) -> impl Future<Output = Result<(Session, Option<StoredTranscript>), PortError>> + Send;

    /// The tenant `id`, with its monthly limit; `NotFound` when there is none.
    fn tenant(&self, id: &TenantId) -> impl Future<Output = Result<Tenant, PortError>> + Send;

    /// What the projects under the tenant key `tenant_key` spent in `month` (USD; 0 when
    /// nothing was counted).
    fn month_spent(
        &self,
        tenant_key: &str,
        month: &str,
    ) -> impl Future<Output = Result<f64, PortError>> + Send;
}

/// Carrying a paused turn on: its session's pending actions, the mark that an answered action's
/// turn was carried on, and the `runs` queue the continuation goes to.
pub trait Continuations: Queues + Send + Sync {
    /// Every pending action of the session (an answer just given is seen), oldest first.
    fn pending_actions_of(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> impl Future<Output = Result<Vec<Action>, PortError>> + Send;

    /// Notes that the settled `action`'s turn was carried on (or another action of it will do
    /// it), so the sweep stops sending its continuation again; noting it twice is fine.
    fn mark_carried_on(&self, action: &Action) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// A session's model calls outside its turns (the title call) and the title they write.
pub trait SessionCalls: Admission + Send + Sync {
    /// Records `call` all at once: its usage on the session, its cost on the tenant's monthly
    /// counter, its `usage` event in the session's log; `NotFound` once the session is gone.
    fn record_side_call(&self, call: &SideCall<'_>) -> impl Future<Output = Result<Event, PortError>> + Send;

    /// Sets a generated title only while the session has none (a title set meanwhile wins);
    /// `false` when it had one or is gone.
    fn set_title_if_unset(
        &self,
        project: &ProjectId,
        id: &SessionId,
        title: &Title,
        now: Timestamp,
    ) -> impl Future<Output = Result<bool, PortError>> + Send;
}

/// The live sessions a client's routes name (a session's files, its actions, its feedback).
pub trait LiveSessions: Send + Sync {
    /// The live session `id` of `project`; `NotFound` when it is missing or deleted.
    fn live_session(
        &self,
        project: &ProjectId,
        id: &SessionId,
    ) -> impl Future<Output = Result<Session, PortError>> + Send;
}

/// What a turn reads of its agent ([`Agents::get_for_turn`]).
#[derive(Debug, Clone)]
pub struct TurnAgent {
    pub agent: Agent,
    /// The tenant of the agent's project (`None`: the project is its own).
    pub tenant: Option<agentplane_domain::tenant::TenantId>,
    /// Whether the project has any webhook endpoint.
    pub hooks: bool,
}

/// One call made for a session outside its turns.
#[derive(Debug, Clone)]
pub struct SideCall<'a> {
    pub project: &'a ProjectId,
    pub session: &'a SessionId,
    pub usage: Usage,
    /// `None`: the model has no price (its tokens count as unpriced).
    pub cost_usd: Option<f64>,
    /// The tenant key whose monthly counter the cost is added to (a project of a tenant).
    pub spend_counter: Option<&'a str>,
    /// The `usage` event that records the call.
    pub event: &'a NewEvent,
    pub now: Timestamp,
    pub retention_days: i64,
}
