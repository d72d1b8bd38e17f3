//! The retention and cleanup ports over DynamoDB and S3.

use std::collections::BTreeSet;

use crate::{Objects, Store};
use agentplane_domain::Timestamp;
use agentplane_domain::action::{Action, ActionStatus};
use agentplane_domain::agent_run::AgentRun;
use agentplane_domain::bucket::BucketName;
use agentplane_domain::file::{FileId, SessionFile};
use agentplane_domain::platform::Environment;
use agentplane_domain::platform::run::{Run, RunId};
use agentplane_domain::platform::workspace_sweep::{Cycle, ScanPosition, Swept};
use agentplane_domain::sandbox::{Sandbox, SandboxId};
use agentplane_domain::telemetry::EnvironmentId;
use agentplane_domain::webhook::Message;
use agentplane_domain::{ProjectId, SessionId};

use agentplane_engine::ports::PortError;
use agentplane_engine::ports::sweeps::{
    CheckpointReferences, ContentDue, EnvironmentPurgeStore, EraseEventData, ExpiringActions, OwnedItem,
    PurgeDue, RetentionStore, RunContentStore, SessionPurgeStore, WorkspaceSweepStore,
};

impl ExpiringActions for Store {
    async fn due(&self, now: Timestamp, limit: usize) -> Result<Vec<Action>, PortError> {
        Ok(self.actions().due(now, limit).await?)
    }

    async fn expire(&self, action: &Action, now: Timestamp) -> Result<Action, PortError> {
        Ok(self.actions().settle(action, ActionStatus::Expired, None, now).await?)
    }

    async fn waiting(&self, before: Timestamp, limit: usize) -> Result<Vec<Action>, PortError> {
        Ok(self.actions().waiting(before, limit).await?)
    }
}

impl RetentionStore for Store {
    async fn expired_files(&self, now: Timestamp, limit: usize) -> Result<Vec<SessionFile>, PortError> {
        Ok(self.files().expired(now, limit).await?)
    }

    fn file_bucket(&self, bucket: Option<&BucketName>) -> Result<Objects, PortError> {
        Ok(self.file_objects(bucket)?)
    }

    async fn delete_file(
        &self,
        project: &ProjectId,
        session: &SessionId,
        id: &FileId,
    ) -> Result<(), PortError> {
        Ok(self.files().delete(project, session, id).await?)
    }

    async fn expired_agent_runs(&self, now: Timestamp, limit: usize) -> Result<Vec<AgentRun>, PortError> {
        Ok(self.agent_runs().expired(now, limit).await?)
    }

    async fn delete_expired_agent_run(&self, run: &AgentRun) -> Result<(), PortError> {
        Ok(self.agent_runs().delete_expired(run).await?)
    }

    async fn expired_webhook_records(&self, now: Timestamp, limit: usize) -> Result<Vec<Message>, PortError> {
        Ok(self.webhooks().expired_records(now, limit).await?)
    }

    async fn delete_webhook_records(&self, message: &Message) -> Result<(), PortError> {
        Ok(self.webhooks().delete_records(message).await?)
    }

    async fn upgrade_old_sessions(&self, max_pages: usize) -> Result<usize, PortError> {
        Ok(self.session_placement().backfill(max_pages).await?.rewritten)
    }
}

impl SessionPurgeStore for Store {
    async fn sessions_to_purge(&self, now: Timestamp, limit: usize) -> Result<Vec<PurgeDue>, PortError> {
        Ok(self.session_purge().due(now, limit).await?)
    }

    async fn owned_items(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> Result<Vec<OwnedItem>, PortError> {
        Ok(self.session_purge().owned_items(project, session).await?)
    }

    async fn delete_file_object(&self, file: &SessionFile) -> Result<(), PortError> {
        Ok(self.session_purge().delete_file_object(file).await?)
    }

    async fn delete_session_objects(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> Result<usize, PortError> {
        Ok(self.session_purge().delete_prefixed_objects(project, session).await?)
    }

    async fn delete_session_events(&self, session: &SessionId) -> Result<usize, PortError> {
        Ok(self.session_purge().delete_events(session).await?)
    }

    async fn delete_owned_items(&self, items: &[OwnedItem]) -> Result<(), PortError> {
        Ok(self.session_purge().delete_items(items).await?)
    }

    async fn finish_purge(
        &self,
        project: &ProjectId,
        session: &SessionId,
        now: Timestamp,
    ) -> Result<bool, PortError> {
        Ok(self.session_purge().finish(project, session, now).await?)
    }
}

impl CheckpointReferences for Store {
    async fn checkpoint_references(
        &self,
        after: Option<&ScanPosition>,
        limit: usize,
    ) -> Result<(BTreeSet<String>, Option<ScanPosition>), PortError> {
        Ok(self.workspace_sweep().references(after, limit).await?)
    }
}

impl WorkspaceSweepStore for Store {
    async fn sweep_cursor(&self) -> Result<Option<Cycle>, PortError> {
        Ok(self.workspace_sweep().cursor().await?)
    }

    async fn advance_sweep(&self, next: &Cycle) -> Result<(), PortError> {
        Ok(self.workspace_sweep().advance(next).await?)
    }

    async fn marked_manifests(
        &self,
        cycle: u64,
        ids: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, PortError> {
        Ok(self.workspace_sweep().marked_manifests(cycle, ids).await?)
    }

    async fn mark(&self, cycle: u64, kind: Swept, digests: &[&str], now: Timestamp) -> Result<(), PortError> {
        Ok(self.workspace_sweep().mark(cycle, kind, digests.iter().copied(), now).await?)
    }

    async fn marked_between(
        &self,
        cycle: u64,
        kind: Swept,
        first: &str,
        last: &str,
    ) -> Result<BTreeSet<String>, PortError> {
        Ok(self.workspace_sweep().marked_between(cycle, kind, first, last).await?)
    }
}

impl EnvironmentPurgeStore for Store {
    async fn deleted_environments(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> Result<Vec<Environment>, PortError> {
        Ok(self.environments().deleted(now, limit).await?)
    }

    async fn sandbox_record(&self, id: &SandboxId) -> Result<Sandbox, PortError> {
        Ok(self.sandboxes().get_any(id).await?)
    }

    async fn set_purge_manifests(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
        manifests: &[String],
    ) -> Result<(), PortError> {
        Ok(self.environments().set_purge_manifests(project, id, manifests).await?)
    }

    async fn environment_runs(
        &self,
        environment: &EnvironmentId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Run>, PortError> {
        Ok(self.runs().environment_page(environment, after, limit).await?)
    }

    async fn delete_run(&self, project: &ProjectId, id: &RunId) -> Result<(), PortError> {
        Ok(self.runs().delete(project, id).await?)
    }

    async fn delete_environment_links(
        &self,
        project: &ProjectId,
        environment: &EnvironmentId,
    ) -> Result<usize, PortError> {
        Ok(self.environments().delete_links(project, environment).await?)
    }

    async fn delete_purged_environment(
        &self,
        project: &ProjectId,
        id: &EnvironmentId,
    ) -> Result<(), PortError> {
        Ok(self.environments().delete_purged(project, id).await?)
    }
}

impl RunContentStore for Store {
    async fn content_due(&self, until: Timestamp, limit: usize) -> Result<Vec<ContentDue>, PortError> {
        Ok(self.run_content().due(until, limit).await?)
    }

    async fn content_done(&self, due: &ContentDue) -> Result<(), PortError> {
        Ok(self.run_content().done(due).await?)
    }

    async fn postpone_content(&self, due: &ContentDue, at: Timestamp) -> Result<(), PortError> {
        Ok(self.run_content().later(due, at).await?)
    }

    async fn run(&self, project: &ProjectId, id: &RunId) -> Result<Run, PortError> {
        Ok(self.runs().get(project, id).await?)
    }

    async fn erase_turn_events(
        &self,
        session: &SessionId,
        turn: &str,
        erase: EraseEventData,
    ) -> Result<usize, PortError> {
        Ok(self.events().erase_turn(session, turn, erase).await?)
    }

    async fn replace_run(&self, run: &Run, expected: u64) -> Result<(), PortError> {
        Ok(self.runs().replace(run, expected).await?)
    }
}
