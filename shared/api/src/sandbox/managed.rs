//! A Session's managed compute: the allocation of an openai_hosted Session runs in a sandbox on
//! one of Core's nodes. Creating the Session places it there and makes the allocation `active`;
//! when no node can take it the allocation stays `pending` (not created yet). The placer job
//! ([`reconcile`]) later places pending allocations and replaces compute that ended under a
//! live allocation (a new incarnation). Deleting the Session releases the allocation and ends
//! its sandbox.

use std::time::Duration;

use agentplane_domain::Timestamp;
use agentplane_domain::metadata::Metadata;
use agentplane_domain::sandbox::request::CreateSandbox;
use agentplane_domain::sandbox::{MANAGED_COMPUTE_LIFETIME_S, SESSION_METADATA_KEY, SandboxId};
use agentplane_domain::telemetry::AllocationState;
use agentplane_store::{Allocation, StoreError};
use serde_json::json;

use super::sandboxes::{self, Launch};
use crate::{App, edge};

/// Starts the allocation's compute and binds the allocation to it (replacing the sandbox it is
/// bound to, if any). Failures are logged, not returned: the Session exists either way, and its
/// allocation keeps its state.
pub async fn place(app: &App, allocation: &Allocation) -> Option<Allocation> {
    let session = allocation.session_id;
    let metadata =
        match Metadata::from_json("metadata", &json!({ SESSION_METADATA_KEY: session.to_string() })) {
            Ok(metadata) => metadata,
            Err(err) => {
                tracing::error!(error = %err, "managed compute metadata");
                return None;
            }
        };
    let launch = Launch {
        project_id: allocation.project_id,
        new: CreateSandbox { timeout_s: MANAGED_COMPUTE_LIFETIME_S, metadata, env_vars: Default::default() },
        session_id: Some(session),
    };
    let sandbox = match sandboxes::launch(app, launch).await {
        Ok(sandbox) => sandbox,
        Err(err) => {
            tracing::warn!(%session, status = %err.status(), message = %err, "managed compute not placed; the allocation stays pending");
            return None;
        }
    };
    let activated = app
        .store
        .allocations()
        .activate(
            &allocation.project_id,
            &session,
            sandbox.id.as_str(),
            allocation.sandbox_id.as_deref(),
            None,
            edge::now(),
        )
        .await;
    match activated {
        Ok(allocation) => Some(allocation),
        Err(err) => {
            // Released meanwhile (the Session was deleted), bound by a concurrent placement, or
            // storage failed: nothing may keep running for it.
            if !matches!(err, StoreError::Conflict | StoreError::NotFound) {
                tracing::warn!(%session, error = %err, "binding managed compute failed");
            }
            sandboxes::end(app, &sandbox).await;
            None
        }
    }
}

/// The sandbox the allocation is bound to, if any.
fn bound_sandbox(allocation: &Allocation) -> Option<SandboxId> {
    allocation.sandbox_id.as_deref().and_then(|id| id.parse().ok())
}

/// Ends the released allocation's sandbox, if it had one.
pub async fn end(app: &App, allocation: &Allocation) {
    let Some(id) = bound_sandbox(allocation) else {
        return;
    };
    match app.store.sandboxes().get_any(&id).await {
        Ok(sandbox) => sandboxes::end(app, &sandbox).await,
        Err(err) => tracing::warn!(sandbox = %id, error = %err, "ending managed compute failed"),
    }
}

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

/// Whether a pending allocation is old enough for the placer.
fn due(allocation: &Allocation, now: Timestamp) -> bool {
    let age_ms = now.unix_millis().saturating_sub(allocation.record.created_at.unix_millis());
    age_ms >= i64::try_from(PLACE_AFTER.as_millis()).unwrap_or(i64::MAX)
}

/// One placer pass: gives compute to pending allocations and replaces ended compute under
/// running ones. Placements bind conditionally, so overlapping runs place each allocation once.
pub async fn reconcile(app: &App, now: Timestamp) -> Result<PlacerReport, StoreError> {
    let allocations = app.store.allocations().list_live().await?;
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
            AllocationState::Running => match bound_sandbox(allocation) {
                Some(id) => match app.store.sandboxes().get_any(&id).await {
                    Ok(sandbox) => sandbox.lifecycle.effective(now).is_final(),
                    Err(StoreError::NotFound) => true,
                    Err(err) => return Err(err),
                },
                None => false,
            },
            _ => false,
        };
        if !needs_compute {
            continue;
        }
        match place(app, allocation).await {
            Some(_) if allocation.sandbox_id.is_some() => report.replaced += 1,
            Some(_) => report.placed += 1,
            None => report.failed += 1,
        }
    }
    Ok(report)
}
