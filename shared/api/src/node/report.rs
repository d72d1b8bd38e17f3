//! Applying a node's observation report: the use case is the engine's
//! ([`agentplane_engine::node_report`]); this surface hands it the report over the store.

use agentplane_domain::Timestamp;
use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::command::Report;
use agentplane_store::StoreError;

use crate::App;

pub async fn apply(app: &App, node: &NodeId, report: Report, now: Timestamp) -> Result<(), StoreError> {
    agentplane_engine::node_report::apply(&app.store, node, report, now).await.map_err(Into::into)
}
