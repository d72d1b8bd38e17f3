//! The usage counters of the sandboxes that serve managed allocations, recorded from each
//! heartbeat of their node: what the local observation source reads. A managed sandbox Core
//! lists on the node but the heartbeat leaves out is recorded not running (the node lost it).

use std::collections::HashMap;

use agentplane_domain::Timestamp;
use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::host::Heartbeat;
use agentplane_domain::telemetry::SandboxCounters;
use agentplane_store::StoreError;

use crate::App;

pub async fn record(
    app: &App,
    node: &NodeId,
    heartbeat: &Heartbeat,
    now: Timestamp,
) -> Result<(), StoreError> {
    let hosted = app.store.sandboxes().hosted_by(node).await?;
    let reported: HashMap<_, _> = heartbeat.sandboxes.iter().map(|u| (&u.sandbox_id, u)).collect();
    for sandbox in hosted.iter().filter(|s| s.session_id.is_some()) {
        let counters = SandboxCounters::from_report(
            sandbox,
            reported.get(&sandbox.id).copied(),
            heartbeat.effective_cpu_cores,
            heartbeat.observed_at,
            now,
        );
        match app.store.telemetry().put_sandbox_counters(&counters).await {
            // A newer report got there first.
            Ok(()) | Err(StoreError::Conflict) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}
