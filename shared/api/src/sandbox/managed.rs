//! A Session's managed compute: the use cases (placing, ending, the placer's reconcile pass) are
//! the engine's ([`agentplane_engine::compute`]), over the compute of Core's nodes
//! ([`agentplane_engine::sandboxes::OnNodes`]).

use agentplane_domain::Timestamp;
use agentplane_engine::compute;
use agentplane_engine::sandboxes::OnNodes;
use agentplane_store::{Allocation, Store, StoreError};

use crate::{App, edge};

pub use agentplane_engine::compute::{PLACE_AFTER, PLACER_BUDGET, PlacerReport};

/// Sandboxes on Core's nodes (see [`OnNodes`]).
pub type Nodes<'a> = OnNodes<'a, Store>;

/// Core's nodes, as the deployment's store reaches them.
pub fn nodes(app: &App) -> Nodes<'_> {
    OnNodes(&app.store)
}

/// Starts the allocation's compute and binds the allocation to it (see [`compute::place`]).
pub async fn place(app: &App, allocation: &Allocation) -> Option<Allocation> {
    compute::place(&app.store, &nodes(app), allocation, edge::now()).await
}

/// Ends the released allocation's sandbox, if it had one.
pub async fn end(app: &App, allocation: &Allocation) {
    compute::end(&app.store, &nodes(app), allocation).await
}

/// One placer pass (see [`compute::reconcile`]).
pub async fn reconcile(app: &App, now: Timestamp) -> Result<PlacerReport, StoreError> {
    compute::reconcile(&app.store, &nodes(app), now).await.map_err(Into::into)
}
