//! The node daemons' side of Core: a long poll for the node's commands, and a heartbeat (the
//! host's observation, and the usage counters of the sandboxes serving managed allocations: what
//! the local observation source reads).

use std::collections::HashMap;
use std::time::Duration;

use agentplane_domain::Timestamp;
use agentplane_domain::ids::NodeId;
use agentplane_domain::sandbox::command::CommandEnvelope;
use agentplane_domain::sandbox::host::{Heartbeat, HostObservation};
use agentplane_domain::telemetry::SandboxCounters;

use crate::ports::PortError;
use crate::ports::nodes::NodeDaemons;

/// How often a long poll looks for commands again.
const POLL_EVERY: Duration = Duration::from_millis(50);

/// Why a heartbeat was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum HeartbeatError {
    /// The node is no longer registered.
    #[error("node not found")]
    NodeNotFound,
    #[error(transparent)]
    Port(PortError),
}

/// A missing node is `NodeNotFound`; the rest is the port's.
fn node_found(err: PortError) -> HeartbeatError {
    match err {
        PortError::NotFound => HeartbeatError::NodeNotFound,
        other => HeartbeatError::Port(other),
    }
}

/// Claims the node's pending commands for `connection`, waiting up to `wait` for one to arrive;
/// empty when none came.
pub async fn poll_commands<S: NodeDaemons>(
    store: &S,
    node: &NodeId,
    connection: &str,
    wait: Duration,
) -> Result<Vec<CommandEnvelope>, PortError> {
    let until = tokio::time::Instant::now() + wait;
    loop {
        let commands = store.claim_commands(node, connection).await?;
        if !commands.is_empty() || tokio::time::Instant::now() >= until {
            return Ok(commands);
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Records the node's heartbeat: the counters of its managed sandboxes, then its host
/// observation (read against the one before).
pub async fn heartbeat<S: NodeDaemons>(
    store: &S,
    node: &NodeId,
    heartbeat: Heartbeat,
) -> Result<(), HeartbeatError> {
    let previous = store.node(node).await.map_err(node_found)?;
    record_usage(store, node, &heartbeat, crate::now()).await.map_err(HeartbeatError::Port)?;
    let observation = HostObservation::from_heartbeat(heartbeat, previous.host.as_ref());
    store.record_heartbeat(node, &observation).await.map_err(node_found)
}

/// The usage counters of the node's sandboxes that serve managed allocations, from its
/// heartbeat. A managed sandbox Core lists on the node but the heartbeat leaves out is recorded
/// not running (the node lost it).
async fn record_usage<S: NodeDaemons>(
    store: &S,
    node: &NodeId,
    heartbeat: &Heartbeat,
    now: Timestamp,
) -> Result<(), PortError> {
    let hosted = store.hosted_sandboxes(node).await?;
    let reported: HashMap<_, _> = heartbeat.sandboxes.iter().map(|u| (&u.sandbox_id, u)).collect();
    for sandbox in hosted.iter().filter(|s| s.session_id.is_some()) {
        let counters = SandboxCounters::from_report(
            sandbox,
            reported.get(&sandbox.id).copied(),
            heartbeat.effective_cpu_cores,
            heartbeat.observed_at,
            now,
        );
        match store.put_sandbox_counters(&counters).await {
            // A newer report got there first.
            Ok(()) | Err(PortError::Conflict) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}
