//! Turn admission: what every way of starting a turn reads and checks before the turn runs —
//! the agent, the config its channel runs, the session with its transcript, the tenant's spend
//! against its limit — and the [`TurnRequest`] built from them. The Responses routes,
//! regenerate and edit, A2A and background runs all admit through here; a route only validates
//! its body between the steps (what the input may hold depends on the admitted config).

use agentplane_domain::agent::{Agent, Channel, VersionedConfig};
use agentplane_domain::ids::AgentId;
use agentplane_domain::session::{Session, SessionBudget};
use agentplane_domain::tenant::{TenantId, TenantKey, month_of};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use tokio::time::Instant;

use crate::ports::sessions::{Admission, TurnAgent};
use crate::ports::{ChatModel, PortError, TurnStore};
use crate::turn::{Supersede, TenantSpend};
use crate::{TurnContext, TurnEngine, TurnError, TurnOutcome, TurnRequest};

/// Why a turn is not admitted.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("no such agent in this project")]
    AgentNotFound,
    #[error("the agent has no published version")]
    AgentNotPublished,
    #[error("no such session in this project")]
    SessionNotFound,
    #[error("the tenant's monthly spend limit is reached")]
    SpendLimitReached { spent_usd: f64, max_cost_usd: f64 },
    #[error(transparent)]
    Storage(#[from] PortError),
}

fn or_refused<T>(result: Result<T, PortError>, missing: Refused) -> Result<T, Refused> {
    match result {
        Err(PortError::NotFound) => Err(missing),
        other => Ok(other?),
    }
}

/// An agent admitted to run a turn: what its channel runs, its project's tenant, and whether
/// the project has webhook endpoints.
#[derive(Debug, Clone)]
pub struct Admitted {
    pub agent: Agent,
    pub tenant: Option<TenantId>,
    pub hooks: bool,
    pub channel: Channel,
    pub config: VersionedConfig,
    /// The published version the config is (`None`: the draft).
    pub version: Option<u32>,
}

/// What a turn is given beyond its agent and session.
#[derive(Debug, Default)]
pub struct TurnInput {
    pub input: String,
    /// Short-lived URLs of the session's image files sent with the message.
    pub images: Vec<String>,
    /// The tenant the turn's spend counts toward ([`TurnEngine::tenant_spend`]).
    pub tenant: Option<TenantSpend>,
    /// The earlier turns this one replaces (regenerate, edit).
    pub supersede: Option<Supersede>,
    /// A conversation replayed into a new session.
    pub replay: Option<crate::Replay>,
    /// The turn's own id (a background run names its own); `None`: a fresh one.
    pub turn_id: Option<String>,
}

impl Admitted {
    /// The turn the admitted agent runs in `session`, until `deadline`.
    pub fn request(
        &self,
        session: &Session,
        context: TurnContext,
        given: TurnInput,
        deadline: Instant,
    ) -> TurnRequest {
        TurnRequest {
            project_id: session.project_id,
            session_id: session.id,
            agent_id: self.agent.id,
            channel: self.channel,
            version: self.version,
            config: self.config.clone(),
            input: given.input,
            deadline,
            context: Some(TurnContext { webhooks: self.hooks, ..context }),
            budget: SessionBudget::effective(session.budget, &self.agent.execution),
            turn_id: given.turn_id,
            handover_at: None,
            tenant: given.tenant,
            images: given.images,
            supersede: given.supersede,
            replay: given.replay,
        }
    }
}

impl<S: Admission, M> TurnEngine<S, M> {
    /// The agent `id` of `project`, with its tenant and whether the project has webhook
    /// endpoints (one read); another project's agent is not found.
    pub async fn turn_agent(&self, project: &ProjectId, id: &AgentId) -> Result<TurnAgent, Refused> {
        or_refused(self.store.agent_for_turn(project, id).await, Refused::AgentNotFound)
    }

    /// Admits `found` on `channel`: the draft, or a published version — `pinned` (a queued
    /// run's), else the newest.
    pub async fn admit(
        &self,
        found: TurnAgent,
        channel: Channel,
        pinned: Option<u32>,
    ) -> Result<Admitted, Refused> {
        let TurnAgent { agent, tenant, hooks } = found;
        let (config, version) =
            self.store.agent_config(&agent, channel, pinned).await?.ok_or(Refused::AgentNotPublished)?;
        Ok(Admitted { agent, tenant, hooks, channel, config, version })
    }

    /// A session of `project` and what a turn continues of it (one read of the session and its
    /// transcript).
    pub async fn session_for_turn(
        &self,
        project: &ProjectId,
        id: &SessionId,
    ) -> Result<(Session, TurnContext), Refused> {
        let (session, transcript) =
            or_refused(self.store.session_with_transcript(project, id).await, Refused::SessionNotFound)?;
        let context = TurnContext {
            last_event_seq: session.last_event_seq,
            transcript,
            spent_usd: session.cost_usd,
            webhooks: false,
            superseded: session.superseded_turns.clone(),
        };
        Ok((session, context))
    }

    /// The tenant a turn's spend counts toward (`None`: the project is its own), read with its
    /// limit and whether it has webhook endpoints of its own.
    pub async fn tenant_spend(&self, tenant: Option<TenantId>) -> Result<Option<TenantSpend>, PortError> {
        let Some(id) = tenant else { return Ok(None) };
        let tenant = self.store.tenant(&id).await?;
        Ok(Some(TenantSpend {
            key: TenantKey::Tenant(id).key(),
            monthly_limit_usd: tenant.monthly_spend_limit_usd,
            webhooks: tenant.tenant_endpoint_count > 0,
        }))
    }

    /// The tenant's spend for a turn a caller waits for: refused once the month's spend has
    /// reached the limit (one more read, only for a tenant with a limit). A background run is
    /// not refused here: its turn pauses at the limit instead.
    pub async fn admit_spend(
        &self,
        tenant: Option<TenantId>,
        now: Timestamp,
    ) -> Result<Option<TenantSpend>, Refused> {
        let spend = self.tenant_spend(tenant).await?;
        if let Some(TenantSpend { key, monthly_limit_usd: Some(max), .. }) = &spend {
            let spent = self.store.month_spent(key, &month_of(now)).await?;
            if spent >= *max {
                return Err(Refused::SpendLimitReached { spent_usd: spent, max_cost_usd: *max });
            }
        }
        Ok(spend)
    }
}

impl<S, M> TurnEngine<S, M>
where
    S: TurnStore + Clone + 'static,
    M: ChatModel + Clone + 'static,
{
    /// Runs `request` in a task of its own (the turn ends and releases its session even when the
    /// caller goes away) and waits for it; `None`: the task itself failed.
    pub async fn run_held(&self, request: TurnRequest) -> Option<Result<TurnOutcome, TurnError>> {
        let engine = self.clone();
        tokio::spawn(async move { engine.run_turn(request).await }).await.ok()
    }
}
