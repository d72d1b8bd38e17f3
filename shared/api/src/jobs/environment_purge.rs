//! The purge of deleted Platform environments, as the retention sweep runs it here: the engine's
//! step (`agentplane_engine::environment_purge`) over this deployment's store and the sandboxes
//! of its nodes (the compute the sandbox surface runs).

use agentplane_domain::Timestamp;
use agentplane_engine::environment_purge;
use agentplane_store::StoreError;

pub use agentplane_engine::environment_purge::PurgeReport;

use crate::App;
use crate::sandbox::managed::nodes;

/// One purge pass at `now` (see [`environment_purge::purge_deleted_environments`]).
pub async fn purge_environments_once(app: &App, now: Timestamp) -> Result<PurgeReport, StoreError> {
    environment_purge::purge_deleted_environments(&app.store, &nodes(app), now).await.map_err(Into::into)
}
