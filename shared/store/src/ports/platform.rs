//! The ports of Platform Runs ([`agentplane_engine::ports::platform`]) over DynamoDB: each call delegates to
//! the store's adapter of that entity.

use crate::Store;
use agentplane_domain::ProjectId;
use agentplane_domain::platform::run::{Run, RunId};
use agentplane_domain::platform::{ActiveRollback, Environment, ExecutionLease, RollbackFailure};
use agentplane_domain::sandbox::{ProcessId, ProcessRecord, Sandbox, SandboxId};
use agentplane_domain::session::Session;
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_domain::{SessionId, Timestamp};

use agentplane_engine::ports::platform::{
    OutputPage, PlatformEnvironments, PlatformRuns, RunSessions, TurnHolder, WorkspaceSandboxes,
};
use agentplane_engine::ports::{OutboxEvent, PortError, StoredTranscript};

impl PlatformRuns for Store {
    async fn run(&self, project: &ProjectId, id: &RunId) -> Result<Run, PortError> {
        Ok(self.runs().get(project, id).await?)
    }

    async fn replace_run(&self, run: &Run, expected: u64) -> Result<(), PortError> {
        Ok(self.runs().replace(run, expected).await?)
    }

    async fn replace_run_emitting(
        &self,
        run: &Run,
        expected: u64,
        events: &[OutboxEvent],
    ) -> Result<(), PortError> {
        Ok(self.runs().replace_emitting(run, expected, events).await?)
    }

    async fn runs_in_order(
        &self,
        environment: &EnvironmentId,
        from: u64,
        through: u64,
    ) -> Result<Vec<Run>, PortError> {
        Ok(self.runs().sequence_runs(environment, from, through).await?)
    }

    async fn run_ids_in_order(
        &self,
        environment: &EnvironmentId,
        from: u64,
        through: u64,
    ) -> Result<Vec<RunId>, PortError> {
        Ok(self.runs().sequence_range(environment, from, through).await?)
    }

    async fn create_run(&self, run: &Run, previous: u64) -> Result<(), PortError> {
        Ok(self.runs().create(run, previous).await?)
    }

    async fn send_events(&self, events: &[OutboxEvent]) -> Result<(), PortError> {
        Ok(self.webhooks().dispatch(events).await?)
    }
}

impl PlatformEnvironments for Store {
    async fn environment(&self, project: &ProjectId, id: &EnvironmentId) -> Result<Environment, PortError> {
        Ok(self.environments().get(project, id).await?)
    }

    async fn claim_execution(
        &self,
        read: &Environment,
        run: &RunId,
        sequence: u64,
        settled: u64,
        now: Timestamp,
        until: Timestamp,
    ) -> Result<ExecutionLease, PortError> {
        Ok(self.environments().claim_execution(read, run, sequence, settled, now, until).await?)
    }

    async fn renew_execution(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        lease: &ExecutionLease,
        until: Timestamp,
    ) -> Result<(), PortError> {
        Ok(self.environments().renew_execution(project, environment, lease, until).await?)
    }

    async fn release_execution(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        lease: &ExecutionLease,
    ) -> Result<(), PortError> {
        Ok(self.environments().release_execution(project, environment, lease).await?)
    }

    async fn set_initial_checkpoint(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        manifest: &str,
    ) -> Result<(), PortError> {
        Ok(self.environments().set_initial_checkpoint(project, environment, manifest).await?)
    }

    async fn bind_sandbox(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        sandbox: &SandboxId,
        previous: Option<&SandboxId>,
    ) -> Result<(), PortError> {
        Ok(self.environments().bind_sandbox(project, environment, sandbox, previous).await?)
    }

    async fn begin_rollback(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        rollback: &ActiveRollback,
    ) -> Result<(), PortError> {
        Ok(self.environments().begin_rollback(project, environment, rollback).await?)
    }

    async fn end_rollback(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        run: &RunId,
    ) -> Result<(), PortError> {
        Ok(self.environments().end_rollback(project, environment, run).await?)
    }

    async fn fail_rollback(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
        failure: &RollbackFailure,
    ) -> Result<(), PortError> {
        Ok(self.environments().fail_rollback(project, environment, failure).await?)
    }

    async fn outbox_due(&self, now: Timestamp, limit: usize) -> Result<Vec<Environment>, PortError> {
        Ok(self.environments().outbox_due(now, limit).await?)
    }

    async fn reschedule_outbox(&self, environment: &Environment, now: Timestamp) -> Result<(), PortError> {
        Ok(self.environments().reschedule_outbox(environment, now).await?)
    }

    async fn clear_outbox(&self, environment: &Environment) -> Result<(), PortError> {
        Ok(self.environments().clear_outbox(environment).await?)
    }
}

impl RunSessions for Store {
    async fn session_with_transcript(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> Result<(Session, Option<StoredTranscript>), PortError> {
        Ok(self.turns().session_with_transcript(project, session).await?)
    }

    async fn turn_holder(&self, project: &ProjectId, session: &SessionId) -> Result<TurnHolder, PortError> {
        Ok(self.sessions().turn_holder(project, session).await?)
    }

    async fn cancel_turn(
        &self,
        project: &ProjectId,
        session: &SessionId,
        now: Timestamp,
    ) -> Result<Session, PortError> {
        Ok(self.sessions().cancel_turn(project, session, now).await?)
    }

    async fn settle_turn_of(
        &self,
        project: &ProjectId,
        session: &SessionId,
        turn_id: &str,
        now: Timestamp,
    ) -> Result<bool, PortError> {
        Ok(self.sessions().settle_turn_of(project, session, turn_id, now).await?)
    }

    async fn restore_transcript(
        &self,
        project: &ProjectId,
        session: &SessionId,
        body: Option<&str>,
    ) -> Result<(), PortError> {
        Ok(self.transcripts().restore(project, session, body).await?)
    }
}

impl WorkspaceSandboxes for Store {
    async fn sandbox_record(&self, id: &SandboxId) -> Result<Sandbox, PortError> {
        Ok(self.sandboxes().get_any(id).await?)
    }

    async fn next_process_number(&self, sandbox: &SandboxId, now: Timestamp) -> Result<u32, PortError> {
        Ok(self.sandboxes().next_process_number(sandbox, now).await?)
    }

    async fn process_record(&self, sandbox: &SandboxId, id: ProcessId) -> Result<ProcessRecord, PortError> {
        Ok(self.observations().process(sandbox, id).await?)
    }

    async fn process_output(
        &self,
        sandbox: &SandboxId,
        process: ProcessId,
        after: Option<u64>,
        limit: usize,
        now: Timestamp,
    ) -> Result<OutputPage, PortError> {
        Ok(self.observations().output(sandbox, process, after, limit, now).await?)
    }
}
