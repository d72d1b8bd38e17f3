//! A Session's managed compute: the allocation of an openai_hosted Session runs in a sandbox on
//! one of Core's nodes. Creating the Session places it there and makes the allocation `active`;
//! when no node can take it the allocation stays `pending` (not created yet). Deleting the
//! Session releases the allocation and ends its sandbox.

use agentplane_domain::metadata::Metadata;
use agentplane_domain::sandbox::request::CreateSandbox;
use agentplane_domain::sandbox::{MANAGED_COMPUTE_LIFETIME_S, SESSION_METADATA_KEY, SandboxId};
use agentplane_store::{Allocation, StoreError};
use serde_json::json;

use super::sandboxes::{self, Launch};
use crate::{App, edge};

/// Starts the allocation's compute and binds the allocation to it. Failures are logged, not
/// returned: the Session exists either way, and its allocation stays `pending`.
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
            tracing::warn!(%session, status = %err.status, message = %err.message, "managed compute not placed; the allocation stays pending");
            return None;
        }
    };
    let activated = app
        .store
        .allocations()
        .activate(&allocation.project_id, &session, sandbox.id.as_str(), None, edge::now())
        .await;
    match activated {
        Ok(allocation) => Some(allocation),
        Err(err) => {
            // Released meanwhile (the Session was deleted), or storage failed: nothing may keep
            // running for it.
            if !matches!(err, StoreError::Conflict | StoreError::NotFound) {
                tracing::warn!(%session, error = %err, "binding managed compute failed");
            }
            sandboxes::end(app, &sandbox).await;
            None
        }
    }
}

/// Ends the released allocation's sandbox, if it had one.
pub async fn end(app: &App, allocation: &Allocation) {
    let Some(id) = allocation.sandbox_id.as_deref().and_then(|id| id.parse::<SandboxId>().ok()) else {
        return;
    };
    match app.store.sandboxes().get_any(&id).await {
        Ok(sandbox) => sandboxes::end(app, &sandbox).await,
        Err(err) => tracing::warn!(sandbox = %id, error = %err, "ending managed compute failed"),
    }
}
