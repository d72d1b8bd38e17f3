//! A Session's managed compute: the use cases (placing, ending, the placer's reconcile pass) are
//! the engine's ([`agentplane_engine::compute`]); this module gives them the compute this surface
//! runs (a node picked and asked to start or kill a sandbox, [`sandboxes::launch`] and
//! [`sandboxes::end`]).

use agentplane_domain::sandbox::Sandbox;
use agentplane_domain::sandbox::request::CreateSandbox;
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use agentplane_engine::compute;
use agentplane_store::{Allocation, StoreError};

use super::error::SandboxError;
use super::sandboxes::{self, Launch};
use crate::{App, edge};

pub use agentplane_engine::compute::{PLACE_AFTER, PLACER_BUDGET, PlacerReport};

/// Sandboxes on Core's nodes, as this surface launches and ends them.
pub struct Nodes<'a>(pub(crate) &'a App);

impl agentplane_engine::ports::Compute for Nodes<'_> {
    type Error = SandboxError;

    async fn launch(
        &self,
        project_id: ProjectId,
        new: CreateSandbox,
        session_id: Option<SessionId>,
    ) -> Result<Sandbox, SandboxError> {
        sandboxes::launch(self.0, Launch { project_id, new, session_id }).await
    }

    async fn end(&self, sandbox: &Sandbox) {
        sandboxes::end(self.0, sandbox).await
    }
}

/// Starts the allocation's compute and binds the allocation to it (see [`compute::place`]).
pub async fn place(app: &App, allocation: &Allocation) -> Option<Allocation> {
    compute::place(&app.store, &Nodes(app), allocation, edge::now()).await
}

/// Ends the released allocation's sandbox, if it had one.
pub async fn end(app: &App, allocation: &Allocation) {
    compute::end(&app.store, &Nodes(app), allocation).await
}

/// One placer pass (see [`compute::reconcile`]).
pub async fn reconcile(app: &App, now: Timestamp) -> Result<PlacerReport, StoreError> {
    compute::reconcile(&app.store, &Nodes(app), now).await.map_err(Into::into)
}
