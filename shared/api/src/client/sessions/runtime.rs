//! A session's managed compute, as far as the sessions routes are concerned: a session in a mode
//! other than none gets an environment; an openai_hosted one also gets a managed allocation,
//! which is placed on a sandbox node at once (`pending` while no node can take it); releasing
//! the session stops the allocation and ends its sandbox.

use agentplane_domain::session::{EnvironmentMode, Session};
use agentplane_domain::telemetry::{AllocationId, AllocationRecord, AllocationState, EnvironmentId};
use agentplane_domain::{ProjectId, SessionId};
use agentplane_engine::runtime::LOCAL_PROVIDER;
use agentplane_store::{Allocation, StoreError};

use crate::client::error::ClientError;
use crate::sandbox::managed;
use crate::{App, edge};

/// Gives the new session its environment (before it is stored).
pub fn prepare(session: &mut Session) -> Result<(), ClientError> {
    if session.environment_mode != EnvironmentMode::None {
        let bytes = edge::random()?;
        session.environment_id = Some(EnvironmentId::from_random(bytes));
    }
    Ok(())
}

/// Creates the allocation of a stored openai_hosted session and places its compute.
pub async fn allocate(app: &App, session: &Session) -> Result<(), ClientError> {
    let (EnvironmentMode::OpenaiHosted, Some(environment_id)) =
        (session.environment_mode, session.environment_id)
    else {
        return Ok(());
    };
    let bytes = edge::random()?;
    let allocation = Allocation {
        project_id: session.project_id,
        session_id: session.id,
        environment_id,
        record: AllocationRecord {
            allocation_id: AllocationId::from_random(bytes),
            device_id: None,
            provider_type: LOCAL_PROVIDER.to_owned(),
            state: AllocationState::Pending,
            created_at: session.created_at,
        },
        sandbox_id: None,
        updated_at: session.created_at,
    };
    app.store.allocations().create(&allocation).await?;
    managed::place(app, &allocation).await;
    Ok(())
}

/// Stops the session's allocation, if it has one (before the session itself is deleted, so a
/// failure here leaves a live session to retry on, never an orphaned running allocation).
pub async fn release(app: &App, project: &ProjectId, session: &SessionId) -> Result<(), ClientError> {
    match app.store.allocations().release(project, session, edge::now()).await {
        Ok(released) => {
            managed::end(app, &released).await;
            Ok(())
        }
        Err(StoreError::NotFound) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
