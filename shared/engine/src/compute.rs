//! A Session's managed compute: the allocation of an openai_hosted Session runs in a sandbox on
//! one of Core's nodes. Placing starts compute and makes the allocation `active`; when no node
//! can take it the allocation stays `pending` (not created yet). [`reconcile`] (the placer job)
//! later places pending allocations and replaces compute that ended under a live allocation (a
//! new incarnation). Releasing the Session ends its sandbox ([`end`]).
//!
//! Runs over ports: the allocation and sandbox records ([`AllocationBinding`],
//! [`LiveAllocations`], [`SandboxRecords`]) and the compute itself ([`Compute`], which the
//! sandbox surface implements: picking a node, asking it to start or kill a sandbox).

use std::time::Duration;

use agentplane_domain::Timestamp;
use agentplane_domain::metadata::Metadata;
use agentplane_domain::sandbox::request::CreateSandbox;
use agentplane_domain::sandbox::{MANAGED_COMPUTE_LIFETIME_S, SESSION_METADATA_KEY};
use agentplane_domain::telemetry::AllocationState;
use serde_json::json;

use crate::ports::{Allocation, AllocationBinding, Compute, LiveAllocations, PortError, SandboxRecords};

/// How old a pending allocation must be before the placer takes it (the Session's create places
/// it at once; this keeps the two from racing for a fresh one).
pub const PLACE_AFTER: Duration = Duration::from_secs(30);
/// The most time one placer run spends starting placements (each waits up to 10 s for a node).
pub const PLACER_BUDGET: Duration = Duration::from_secs(30);

/// What one placer run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlacerReport {
    /// Live allocations looked at.
    pub allocations: usize,
    /// Pending allocations given compute.
    pub placed: usize,
    /// Allocations whose compute had ended and was replaced (a new incarnation).
    pub replaced: usize,
    /// Placements that did not succeed (no node, a node that did not answer, a lost race).
    pub failed: usize,
}

/// Starts the allocation's compute and binds the allocation to it (replacing the sandbox it is
/// bound to, if any). Failures are logged, not returned: the Session exists either way, and its
/// allocation keeps its state.
pub async fn place<S: AllocationBinding, C: Compute>(
    store: &S,
    compute: &C,
    allocation: &Allocation,
    now: Timestamp,
) -> Option<Allocation> {
    let session = allocation.session_id;
    let metadata =
        match Metadata::from_json("metadata", &json!({ SESSION_METADATA_KEY: session.to_string() })) {
            Ok(metadata) => metadata,
            Err(err) => {
                tracing::error!(error = %err, "managed compute metadata");
                return None;
            }
        };
    let new = CreateSandbox { timeout_s: MANAGED_COMPUTE_LIFETIME_S, metadata, env_vars: Default::default() };
    let sandbox = match compute.launch(allocation.project_id, new, Some(session)).await {
        Ok(sandbox) => sandbox,
        Err(err) => {
            tracing::warn!(%session, message = %err, "managed compute not placed; the allocation stays pending");
            return None;
        }
    };
    let activated = store
        .activate_allocation(
            &allocation.project_id,
            &session,
            &sandbox.id,
            allocation.sandbox_id.as_ref(),
            now,
        )
        .await;
    match activated {
        Ok(allocation) => Some(allocation),
        Err(err) => {
            // Released meanwhile (the Session was deleted), bound by a concurrent placement, or
            // storage failed: nothing may keep running for it.
            if !matches!(err, PortError::Conflict | PortError::NotFound) {
                tracing::warn!(%session, error = %err, "binding managed compute failed");
            }
            compute.end(&sandbox).await;
            None
        }
    }
}

/// Ends the released allocation's sandbox, if it had one.
pub async fn end<S: SandboxRecords, C: Compute>(store: &S, compute: &C, allocation: &Allocation) {
    let Some(id) = &allocation.sandbox_id else {
        return;
    };
    match store.sandbox(id).await {
        Ok(sandbox) => compute.end(&sandbox).await,
        Err(err) => tracing::warn!(sandbox = %id, error = %err, "ending managed compute failed"),
    }
}

/// Whether a pending allocation is old enough for the placer.
fn due(allocation: &Allocation, now: Timestamp) -> bool {
    let age_ms = now.unix_millis().saturating_sub(allocation.record.created_at.unix_millis());
    age_ms >= i64::try_from(PLACE_AFTER.as_millis()).unwrap_or(i64::MAX)
}

/// One placer pass: gives compute to pending allocations and replaces ended compute under
/// running ones. Placements bind conditionally, so overlapping runs place each allocation once.
/// Each binding is stamped with the wall clock at the time it is made.
pub async fn reconcile<S, C>(store: &S, compute: &C, now: Timestamp) -> Result<PlacerReport, PortError>
where
    S: LiveAllocations + AllocationBinding + SandboxRecords,
    C: Compute,
{
    let allocations = store.live_allocations().await?;
    let mut report = PlacerReport { allocations: allocations.len(), ..PlacerReport::default() };
    let started = tokio::time::Instant::now();
    for allocation in &allocations {
        if started.elapsed() >= PLACER_BUDGET {
            tracing::info!(?report, "placer budget spent; the next run continues");
            break;
        }
        let needs_compute = match allocation.record.state {
            AllocationState::Pending => allocation.sandbox_id.is_none() && due(allocation, now),
            // Running on compute that has ended (or is gone): replace it.
            AllocationState::Running => match &allocation.sandbox_id {
                Some(id) => match store.sandbox(id).await {
                    Ok(sandbox) => sandbox.lifecycle.effective(now).is_final(),
                    Err(PortError::NotFound) => true,
                    Err(err) => return Err(err),
                },
                None => false,
            },
            _ => false,
        };
        if !needs_compute {
            continue;
        }
        match place(store, compute, allocation, crate::now()).await {
            Some(_) if allocation.sandbox_id.is_some() => report.replaced += 1,
            Some(_) => report.placed += 1,
            None => report.failed += 1,
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests;
