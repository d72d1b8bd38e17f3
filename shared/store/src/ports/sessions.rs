//! [`Admission`], [`Continuations`], [`LiveSessions`], [`SessionCalls`] and [`SessionStore`] over
//! DynamoDB.

use crate::Store;
use agentplane_domain::action::Action;
use agentplane_domain::agent::{Agent, Channel, VersionedConfig};
use agentplane_domain::event::Event;
use agentplane_domain::ids::AgentId;
use agentplane_domain::project::Project;
use agentplane_domain::session::{Session, SessionPatch, Title};
use agentplane_domain::tenant::{Tenant, TenantId};
use agentplane_domain::{ProjectId, SessionId, Timestamp};

use agentplane_engine::ports::background::TenantPause;
use agentplane_engine::ports::client_sessions::SessionStore;
use agentplane_engine::ports::sessions::{
    Admission, Continuations, LiveSessions, SessionCalls, SideCall, TurnAgent,
};
use agentplane_engine::ports::{Allocation, PortError, StoredTranscript};

impl Admission for Store {
    async fn project(&self, id: &ProjectId) -> Result<Project, PortError> {
        Ok(self.projects().get(id).await?)
    }

    async fn agent_for_turn(&self, project: &ProjectId, id: &AgentId) -> Result<TurnAgent, PortError> {
        Ok(self.agents().get_for_turn(project, id).await?)
    }

    async fn agent_config(
        &self,
        agent: &Agent,
        channel: Channel,
        pinned: Option<u32>,
    ) -> Result<Option<(VersionedConfig, Option<u32>)>, PortError> {
        Ok(self.agents().config_of(agent, channel, pinned).await?)
    }

    async fn session_with_transcript(
        &self,
        project: &ProjectId,
        id: &SessionId,
    ) -> Result<(Session, Option<StoredTranscript>), PortError> {
        Ok(self.turns().session_with_transcript(project, id).await?)
    }

    async fn tenant(&self, id: &TenantId) -> Result<Tenant, PortError> {
        Ok(self.tenants().get(id).await?)
    }

    async fn month_spent(&self, tenant_key: &str, month: &str) -> Result<f64, PortError> {
        Ok(self.tenants().spent(tenant_key, month).await?)
    }
}

impl Continuations for Store {
    async fn pending_actions_of(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> Result<Vec<Action>, PortError> {
        Ok(self.actions().pending(project, session).await?)
    }

    async fn mark_carried_on(&self, action: &Action) -> Result<(), PortError> {
        Ok(self.actions().mark_carried_on(action).await?)
    }
}

impl LiveSessions for Store {
    async fn live_session(&self, project: &ProjectId, id: &SessionId) -> Result<Session, PortError> {
        Ok(self.sessions().get(project, id).await?)
    }
}

impl SessionCalls for Store {
    async fn record_side_call(&self, call: &SideCall<'_>) -> Result<Event, PortError> {
        Ok(self.side_calls().record(call).await?)
    }

    async fn set_title_if_unset(
        &self,
        project: &ProjectId,
        id: &SessionId,
        title: &Title,
        now: Timestamp,
    ) -> Result<bool, PortError> {
        Ok(self.sessions().set_title_if_unset(project, id, title, now).await?)
    }
}

impl SessionStore for Store {
    async fn create_session(&self, session: &Session) -> Result<(), PortError> {
        Ok(self.sessions().create(session).await?)
    }

    async fn update_session(
        &self,
        project: &ProjectId,
        id: &SessionId,
        patch: SessionPatch,
        now: Timestamp,
    ) -> Result<Session, PortError> {
        Ok(self.sessions().update(project, id, patch, now).await?)
    }

    async fn delete_session(
        &self,
        project: &ProjectId,
        id: &SessionId,
        now: Timestamp,
    ) -> Result<(), PortError> {
        Ok(self.sessions().delete(project, id, now).await?)
    }

    async fn settle_dead_turn(
        &self,
        project: &ProjectId,
        id: &SessionId,
        now: Timestamp,
    ) -> Result<bool, PortError> {
        Ok(self.sessions().settle_dead_turn(project, id, now).await?)
    }

    async fn note_pause(&self, pause: &TenantPause) -> Result<(), PortError> {
        Ok(self.tenant_pauses().note(pause).await?)
    }

    async fn cancel_all_pending(
        &self,
        project: &ProjectId,
        session: &SessionId,
        now: Timestamp,
    ) -> Result<Vec<Action>, PortError> {
        Ok(self.actions().cancel_all_pending(project, session, now).await?)
    }

    async fn create_allocation(&self, allocation: &Allocation) -> Result<(), PortError> {
        Ok(self.allocations().create(allocation).await?)
    }

    async fn release_allocation(
        &self,
        project: &ProjectId,
        session: &SessionId,
        now: Timestamp,
    ) -> Result<Allocation, PortError> {
        Ok(self.allocations().release(project, session, now).await?)
    }
}
