//! The engine's ports over DynamoDB, S3 and SQS: each call delegates to the store's adapter of
//! that entity (no rule lives here) and answers the port's error.

mod actions;
mod agents;
mod background;
mod blobs;
mod buckets;
mod commands;
mod environments;
mod feedback;
mod files;
mod nodes;
mod platform;
mod queues;
mod runs;
mod sandboxes;
mod sessions;
mod sweeps;
mod tenants;
mod webhooks;

use std::collections::{BTreeMap, HashMap};

use crate::{Store, StoreError};
use agentplane_domain::action::{Action, ActionId, Continuation};
use agentplane_domain::event::{Event, NewEvent};
use agentplane_domain::pricing::Usage;
use agentplane_domain::sandbox::retention::ChunkMeta;
use agentplane_domain::sandbox::{Lifecycle, ProcessId, ProcessRecord, Sandbox, SandboxId};
use agentplane_domain::session::{Session, StopReason};
use agentplane_domain::telemetry::{RuntimeSample, SandboxCounters};
use agentplane_domain::{ProjectId, SessionId, Timestamp};

use agentplane_engine::ports::{
    Allocation, AllocationBinding, Committed, EventLog, LiveAllocations, PortError, ProcessObservations,
    RetentionState, SampleLog, SandboxCounterLog, SandboxRecords, SessionReader, StepCommit, StoredChunk,
    StoredTranscript, TurnHold, TurnStart, TurnStore, TurnWriteError,
};

impl TurnStore for Store {
    async fn begin(&self, start: &TurnStart<'_>) -> Result<Vec<Event>, TurnWriteError> {
        self.turns().begin(start).await
    }

    async fn commit(&self, commit: &StepCommit<'_>) -> Result<Committed, TurnWriteError> {
        self.turns().commit(commit).await
    }

    async fn turn_hold(
        &self,
        project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
    ) -> Result<TurnHold, PortError> {
        let holder = self.sessions().turn_holder(project, session).await?;
        Ok(match holder.turn_id.as_deref() == Some(turn_id) {
            false => TurnHold::Lost,
            true if holder.cancel_requested => TurnHold::Cancelled,
            true => TurnHold::Held,
        })
    }

    async fn add_usage(
        &self,
        project: &ProjectId,
        session: &SessionId,
        usage: Usage,
        cost_usd: Option<f64>,
    ) -> Result<(), PortError> {
        Ok(self.sessions().add_usage(project, session, usage, cost_usd).await?)
    }

    async fn tenant_spent(&self, tenant_key: &str, month: &str) -> Result<f64, PortError> {
        Ok(self.tenants().spent(tenant_key, month).await?)
    }

    async fn note_tenant_pause(
        &self,
        tenant_key: &str,
        project: &ProjectId,
        session: &SessionId,
    ) -> Result<(), PortError> {
        let pause = crate::dynamo::tenant_pauses::TenantPause {
            tenant_key: tenant_key.to_owned(),
            project_id: *project,
            session_id: *session,
        };
        Ok(self.tenant_pauses().note(&pause).await?)
    }

    async fn tenant_limit(&self, tenant_key: &str, saved: Option<f64>) -> Result<Option<f64>, PortError> {
        let Some(id) = agentplane_domain::tenant::TenantKey::tenant_of(tenant_key) else {
            return Ok(saved);
        };
        match self.tenants().get(&id).await {
            Ok(tenant) => Ok(tenant.monthly_spend_limit_usd),
            Err(StoreError::NotFound) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    async fn load_transcript(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> Result<Option<StoredTranscript>, PortError> {
        Ok(self.transcripts().load(project, session).await?)
    }

    async fn claim(
        &self,
        c: &Continuation,
        now: Timestamp,
        hold_until: Timestamp,
    ) -> Result<Option<Session>, PortError> {
        Ok(self.turns().claim(&c.project_id, &c.session_id, &c.turn_id, c.version, now, hold_until).await?)
    }

    async fn actions(
        &self,
        project: &ProjectId,
        session: &SessionId,
        ids: &[ActionId],
    ) -> Result<Vec<Action>, PortError> {
        Ok(self.turns().actions(project, session, ids).await?)
    }

    async fn pending_actions(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> Result<Vec<Action>, PortError> {
        Ok(self.actions().pending(project, session).await?)
    }

    async fn cancel_actions(
        &self,
        project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
        now: Timestamp,
    ) -> Result<Vec<Action>, PortError> {
        Ok(self.actions().cancel_pending(project, session, turn_id, now).await?)
    }

    async fn has_webhooks(&self, project: &ProjectId) -> Result<bool, PortError> {
        Ok(self.webhooks().any_receiving(project).await?)
    }

    async fn dispatch_webhooks(&self, events: &[agentplane_engine::ports::OutboxEvent]) {
        if events.is_empty() {
            return;
        }
        if let Err(err) = self.webhooks().dispatch(events).await {
            tracing::warn!(error = %err, "sending emitted webhook events to the queue failed: the retry job sends them");
        }
    }

    async fn end_paused(
        &self,
        project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
        stop_reason: StopReason,
        events: &[NewEvent],
        from_seq: u64,
        now: Timestamp,
        retention_days: i64,
        emit: &[agentplane_engine::ports::OutboxEvent],
    ) -> Result<Vec<Event>, TurnWriteError> {
        self.turns()
            .end_paused(project, session, turn_id, stop_reason, events, from_seq, now, retention_days, emit)
            .await
    }
}

impl EventLog for Store {
    async fn append_events(
        &self,
        session: &SessionId,
        events: Vec<NewEvent>,
        now: Timestamp,
        retention_days: i64,
        from: Option<u64>,
    ) -> Result<Vec<Event>, PortError> {
        Ok(self.events().append(session, events, now, retention_days, from).await?)
    }
}

impl LiveAllocations for Store {
    async fn live_allocations(&self) -> Result<Vec<Allocation>, PortError> {
        Ok(self.allocations().list_live().await?)
    }
}

impl SessionReader for Store {
    async fn sessions_by_id(
        &self,
        keys: &[(ProjectId, SessionId)],
    ) -> Result<HashMap<SessionId, Session>, PortError> {
        Ok(self.sessions().get_many(keys).await?)
    }
}

impl SampleLog for Store {
    async fn put_samples(&self, samples: &[(SessionId, i64, RuntimeSample)]) -> Vec<Result<bool, PortError>> {
        self.telemetry().put_samples(samples).await.into_iter().map(|r| r.map_err(PortError::from)).collect()
    }
}

impl SandboxCounterLog for Store {
    async fn sandbox_counters(&self, sandbox_id: &str) -> Result<Option<SandboxCounters>, PortError> {
        Ok(self.telemetry().sandbox_counters(sandbox_id).await?)
    }

    async fn sandbox_counters_many(
        &self,
        sandbox_ids: &[&str],
    ) -> Result<HashMap<String, SandboxCounters>, PortError> {
        Ok(self.telemetry().sandbox_counters_many(sandbox_ids).await?)
    }
}

impl SandboxRecords for Store {
    async fn sandbox(&self, id: &SandboxId) -> Result<Sandbox, PortError> {
        Ok(self.sandboxes().get_any(id).await?)
    }

    async fn transition_sandbox(
        &self,
        sandbox: &Sandbox,
        from: &Lifecycle,
        to: &Lifecycle,
    ) -> Result<Sandbox, PortError> {
        Ok(self.sandboxes().transition(sandbox, from, to).await?)
    }

    async fn set_isolation(
        &self,
        id: &SandboxId,
        isolation: &BTreeMap<String, String>,
    ) -> Result<(), PortError> {
        Ok(self.sandboxes().set_isolation(id, isolation).await?)
    }
}

impl AllocationBinding for Store {
    async fn activate_allocation(
        &self,
        project: &ProjectId,
        session: &SessionId,
        sandbox_id: &SandboxId,
        replacing: Option<&SandboxId>,
        now: Timestamp,
    ) -> Result<Allocation, PortError> {
        Ok(self.allocations().activate(project, session, sandbox_id, replacing, None, now).await?)
    }
}

impl ProcessObservations for Store {
    async fn load_index(&self, sandbox: &SandboxId) -> Result<(RetentionState, u64), PortError> {
        Ok(self.observations().load_index(sandbox).await?)
    }

    async fn save_index(
        &self,
        sandbox: &SandboxId,
        state: &RetentionState,
        version: u64,
    ) -> Result<(), PortError> {
        Ok(self.observations().save_index(sandbox, state, version).await?)
    }

    async fn processes(&self, sandbox: &SandboxId) -> Result<Vec<ProcessRecord>, PortError> {
        Ok(self.observations().processes(sandbox).await?)
    }

    async fn put_process(&self, sandbox: &SandboxId, record: &ProcessRecord) -> Result<(), PortError> {
        Ok(self.observations().put_process(sandbox, record).await?)
    }

    async fn put_seen_process(
        &self,
        sandbox: &SandboxId,
        record: &ProcessRecord,
    ) -> Result<Option<ProcessRecord>, PortError> {
        Ok(self.observations().put_seen_process(sandbox, record).await?)
    }

    async fn record_exit(
        &self,
        sandbox: &SandboxId,
        id: ProcessId,
        exit_code: Option<i32>,
        signal: Option<i32>,
        at: Timestamp,
    ) -> Result<(), PortError> {
        Ok(self.observations().record_exit(sandbox, id, exit_code, signal, at).await?)
    }

    async fn mark_gap(&self, sandbox: &SandboxId) -> Result<(), PortError> {
        Ok(self.observations().mark_gap(sandbox).await?)
    }

    async fn set_truncated(&self, sandbox: &SandboxId, id: ProcessId) -> Result<(), PortError> {
        Ok(self.observations().set_truncated(sandbox, id).await?)
    }

    async fn delete_process(&self, sandbox: &SandboxId, id: ProcessId) -> Result<(), PortError> {
        Ok(self.observations().delete_process(sandbox, id).await?)
    }

    async fn put_chunks(
        &self,
        sandbox: &SandboxId,
        chunks: Vec<StoredChunk>,
        now: Timestamp,
    ) -> Result<(), PortError> {
        Ok(self.observations().put_chunks(sandbox, chunks, now).await?)
    }

    async fn delete_chunks(&self, sandbox: &SandboxId, chunks: &[ChunkMeta]) -> Result<(), PortError> {
        Ok(self.observations().delete_chunks(sandbox, chunks).await?)
    }
}
