//! [`BackgroundRuns`], [`LapsedRuns`] and [`TenantResume`] over DynamoDB.

use crate::Store;
use agentplane_domain::agent::Agent;
use agentplane_domain::agent_run::{AgentRun, RunId, RunStatus};
use agentplane_domain::ids::AgentId;
use agentplane_domain::session::Session;
use agentplane_domain::{ProjectId, SessionId, Timestamp};

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::background::{
    Announce, BackgroundRuns, LapsedRuns, RunOutcome, SlotRef, StartRefused, TenantPause, TenantResume,
};

impl BackgroundRuns for Store {
    async fn agent_run(&self, project: &ProjectId, id: &RunId) -> Result<AgentRun, PortError> {
        Ok(self.agent_runs().get(project, id).await?)
    }

    async fn start_run(
        &self,
        run: &AgentRun,
        from: RunStatus,
        tenant_key: &str,
        max: u32,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Result<SlotRef, StartRefused>, PortError> {
        Ok(self.agent_runs().start(run, from, tenant_key, max, now, lease_until).await?)
    }

    async fn renew_run(
        &self,
        slot: &SlotRef,
        run: &AgentRun,
        lease_until: Timestamp,
    ) -> Result<(), PortError> {
        Ok(self.agent_runs().renew(slot, run, lease_until).await?)
    }

    async fn settle_run(
        &self,
        run: &AgentRun,
        slot: Option<&SlotRef>,
        outcome: &RunOutcome,
        announce: Announce<'_>,
        now: Timestamp,
    ) -> Result<AgentRun, PortError> {
        Ok(self.agent_runs().settle(run, slot, outcome, announce, now).await?)
    }
}

impl LapsedRuns for Store {
    async fn lapsed_runs(&self, now: Timestamp, limit: usize) -> Result<Vec<AgentRun>, PortError> {
        Ok(self.agent_runs().lapsed(now, limit).await?)
    }

    async fn settle_lapsed_run(
        &self,
        run: &AgentRun,
        outcome: &RunOutcome,
        announce: Announce<'_>,
        now: Timestamp,
    ) -> Result<AgentRun, PortError> {
        Ok(self.agent_runs().settle_lapsed(run, outcome, announce, now).await?)
    }

    async fn release_dead_turn(
        &self,
        project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
        now: Timestamp,
    ) -> Result<bool, PortError> {
        Ok(self.sessions().settle_turn_of(project, session, turn_id, now).await?)
    }
}

impl TenantResume for Store {
    async fn tenant_pauses_of(&self, tenant_key: &str) -> Result<Vec<TenantPause>, PortError> {
        Ok(self.tenant_pauses().of_tenant(tenant_key).await?)
    }

    async fn all_tenant_pauses(&self) -> Result<Vec<TenantPause>, PortError> {
        Ok(self.tenant_pauses().all().await?)
    }

    async fn forget_tenant_pause(&self, pause: &TenantPause) -> Result<(), PortError> {
        Ok(self.tenant_pauses().remove(pause).await?)
    }

    async fn session(&self, project: &ProjectId, id: &SessionId) -> Result<Session, PortError> {
        Ok(self.sessions().get(project, id).await?)
    }

    async fn agent(&self, project: &ProjectId, id: &AgentId) -> Result<Agent, PortError> {
        Ok(self.agents().get(project, id).await?)
    }
}
